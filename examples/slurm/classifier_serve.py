"""The serving application an encoder classifier's export carries as code/inference.py: the Ray Serve application
`app` the Ray Serve DLC runs (SM_RAYSERVE_APP=inference:app; workloads/planning/contracts.py), which SageMaker's
/invocations proxies to with the request body. It reads the model directory (/opt/ml/model, where SageMaker unpacks
model.tar.gz) with safetensors and tokenizers and the encoder module beside it (code/encoder_model.py), so it needs no
`transformers` on the image and nothing from the network (the endpoint is network-isolated).

Request: one JSON document, {"inputs": "text"} or {"inputs": ["text", ...]} (a bare string or list too).
Response: [{"label": NAME, "score": p}, ...], one per text: the text-classification pipeline's answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MODEL_DIR = Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))


class Classifier:
    """The exported model, tokenizer and labels, answering a batch of texts."""

    def __init__(self, directory: Path = MODEL_DIR) -> None:
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        import encoder_model  # code/, on PYTHONPATH on the endpoint

        config = json.loads((directory / "config.json").read_text())
        self.labels = {int(i): name for i, name in config["id2label"].items()}
        self.model = encoder_model.from_config(config)
        self.model.load_state_dict(load_file(str(directory / "model.safetensors")))
        self.model.eval()
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(config["max_position_embeddings"])
        self.tokenizer.enable_padding(pad_id=config.get("pad_token_id", 0))
        self.torch = torch

    def predict(self, texts: list[str]) -> list[dict]:
        torch = self.torch
        encodings = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings])
        mask = torch.tensor([e.attention_mask for e in encodings])
        with torch.no_grad():
            probabilities = self.model(ids, mask).softmax(-1)
        best = probabilities.argmax(-1).tolist()
        return [{"label": self.labels[b], "score": probabilities[i, b].item()} for i, b in enumerate(best)]


def texts_of(body: bytes | str) -> list[str]:
    document = json.loads(body)
    inputs = document.get("inputs", document) if isinstance(document, dict) else document
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError('expected {"inputs": "text"} or {"inputs": ["text", ...]}')
    return texts


try:  # on the endpoint; the trainer's tests import this file without Ray
    from ray import serve
except ImportError:  # pragma: no cover - Ray is the serving image's
    serve = None

if serve is not None:
    @serve.deployment
    class Endpoint:
        def __init__(self) -> None:
            self.classifier = Classifier()

        async def __call__(self, request):
            from starlette.responses import JSONResponse

            try:
                texts = texts_of(await request.body())
            except ValueError as e:  # json.JSONDecodeError is one
                return JSONResponse({"error": str(e)}, status_code=400)
            return JSONResponse(self.classifier.predict(texts))

    app = Endpoint.bind()
