"""Helpers the tests share: servers, models, hubs and schema checks (no tests here)."""
