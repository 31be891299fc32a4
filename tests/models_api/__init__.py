"""Tests of the models API (/superfluid/v1/models…)."""
