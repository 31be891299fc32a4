"""Logit biases that keep a tiny model from ending its answer on its own.

The tiny random-weight models end on ``<|im_end|>`` after a few dozen sampled tokens, so
a test that needs a generation to reach its cap, or to be still running when it acts on
it, seeds the request and bans that token: then the outcome is fixed, not likely.
"""

from __future__ import annotations

from jupyter_superfluid.builtin_models.tiny_gguf import BOS_TOKEN, EOS_TOKEN, vocabulary

EOS_ID = vocabulary()[0].index(EOS_TOKEN)
# llama.cpp also ends a generation on <|endoftext|>: the models make it rare, not impossible.
END_IDS = (EOS_ID, vocabulary()[0].index(BOS_TOKEN))
# For the engine (SamplingParams.logit_bias): token id → bias.
NO_EOS: dict[int, float] = dict.fromkeys(END_IDS, -100.0)
# For the wire (OpenAI ``logit_bias``, LMSP's superfluid extension): JSON object keys.
NO_EOS_WIRE: dict[str, int] = {str(token): -100 for token in END_IDS}
# Request fields (the SDK's ``extra_body``, a raw JSON body, LMSP's superfluid extension)
# for an answer that surely runs to its token cap, the same one every time.
RUN_TO_CAP: dict[str, object] = {"seed": 0, "logit_bias": NO_EOS_WIRE}
