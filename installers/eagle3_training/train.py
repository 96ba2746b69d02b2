"""Train the built-in model's EAGLE-3 head on what ``collect.py`` stored (PyTorch, CPU).

The head is llama.cpp's ``eagle3`` graph written in PyTorch, so the trained weights load there as they
are (``export.py`` writes the GGUF):

- ``g = fc(features)``: the three layer inputs of a target position fused into one vector;
- one decoder layer over ``[rmsnorm(embedding(token)), rmsnorm(g)]`` (Q/K/V read both halves), with
  llama.cpp's plain RoPE (adjacent pairs) at base 100,000 and 9 query heads over 3 key/value heads;
  the attention output is added to the raw ``g``, then a SwiGLU FFN with its residual gives ``h``,
  the next chained row's ``g``;
- logits over a draft vocabulary (the :data:`DRAFT_VOCAB` tokens the teacher likes most in the
  data, llama.cpp's ``d2t``), from the head's own output matrix, which starts as the target's
  embedding rows of those tokens. The token embeddings are the target's, frozen.

**Training-time test** (EAGLE-3): step 0 pairs ``g[i]`` with the true token ``x[i+1]`` at position i
and learns the teacher's distribution of ``x[i+2]``; step s pairs step s-1's ``h[i]`` with ``x[i+s+1]``
at position i + s. A step-s row attends to the step-0 rows 0..i and to its own chain's rows of steps
1..s, which is what the head's cache holds when it drafts. Step s's loss weighs 0.8^s.

Run with an environment that has torch (``pip install torch==2.13.0 numpy``):
``python installers/eagle3_training/train.py DATA OUT.npz [--epochs N] [--steps S]``; ``DATA`` holds
``collect.py``'s shards and ``embeddings.npy`` (``export.py embeddings``). The last shard of answers is
held out: per epoch it prints the share of positions where the head's first guess is the teacher's
likeliest token, per step.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

N_EMBD, N_FF, N_HEAD, N_HEAD_KV, HEAD_DIM = 576, 1536, 9, 3, 64
ROPE_BASE, RMS_EPS = 100_000.0, 1e-5
DRAFT_VOCAB = 8192
STEP_DECAY = 0.8


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * weight


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """llama.cpp's ``LLAMA_ROPE_TYPE_NORM``: pairs (0, 1), (2, 3), ... of each head rotate together.
    ``x`` is ``[..., n, heads, HEAD_DIM]``, ``positions`` ``[..., n]``."""
    inv = ROPE_BASE ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)
    angle = positions.to(torch.float32)[..., None] * inv  # [..., n, HEAD_DIM / 2]
    cos, sin = angle.cos()[..., None, :], angle.sin()[..., None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


class Head(torch.nn.Module):
    def __init__(self, embeddings: np.ndarray, d2t: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("embd", torch.from_numpy(embeddings))
        self.fc = torch.nn.Linear(3 * N_EMBD, N_EMBD, bias=False)
        self.attn_norm = torch.nn.Parameter(torch.ones(N_EMBD))
        self.attn_norm_2 = torch.nn.Parameter(torch.ones(N_EMBD))
        self.q = torch.nn.Linear(2 * N_EMBD, N_HEAD * HEAD_DIM, bias=False)
        self.k = torch.nn.Linear(2 * N_EMBD, N_HEAD_KV * HEAD_DIM, bias=False)
        self.v = torch.nn.Linear(2 * N_EMBD, N_HEAD_KV * HEAD_DIM, bias=False)
        self.o = torch.nn.Linear(N_HEAD * HEAD_DIM, N_EMBD, bias=False)
        self.ffn_norm = torch.nn.Parameter(torch.ones(N_EMBD))
        self.gate = torch.nn.Linear(N_EMBD, N_FF, bias=False)
        self.up = torch.nn.Linear(N_EMBD, N_FF, bias=False)
        self.down = torch.nn.Linear(N_FF, N_EMBD, bias=False)
        self.output_norm = torch.nn.Parameter(torch.ones(N_EMBD))
        self.output = torch.nn.Parameter(torch.from_numpy(embeddings[d2t].copy()))
        for layer in (self.o, self.down):
            layer.weight.data.mul_(0.5)

    def qkv(self, tokens: torch.Tensor, g: torch.Tensor, positions: torch.Tensor):
        """Q, K, V of rows ``(tokens, g)`` at ``positions``: ``[b, n, heads, HEAD_DIM]``."""
        x = torch.cat([rms_norm(self.embd[tokens], self.attn_norm), rms_norm(g, self.attn_norm_2)], dim=-1)
        b, n = tokens.shape
        q = rope(self.q(x).view(b, n, N_HEAD, HEAD_DIM), positions)
        k = rope(self.k(x).view(b, n, N_HEAD_KV, HEAD_DIM), positions)
        return q, k, self.v(x).view(b, n, N_HEAD_KV, HEAD_DIM)

    def finish(self, attended: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits over the draft vocabulary and ``h`` from the attention's output ``[b, n, N_HEAD * HEAD_DIM]``."""
        ffn_inp = self.o(attended) + g
        x = rms_norm(ffn_inp, self.ffn_norm)
        h = self.down(F.silu(self.gate(x)) * self.up(x)) + ffn_inp
        return rms_norm(h, self.output_norm) @ self.output.T, h

    def forward(self, features: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor, n_steps: int):
        """Per step s, logits ``[b, n, DRAFT_VOCAB]`` of the rows (x[i+s+1], g) at i + s; rows whose token is
        past a sequence's end are garbage and masked by the loss."""
        b, n = tokens.shape
        group = N_HEAD // N_HEAD_KV
        scale = 1.0 / math.sqrt(HEAD_DIM)
        base = torch.arange(n)
        g = self.fc(features)
        keys0 = vals0 = None
        chain_k, chain_v, out = [], [], []
        causal = base[None, :] <= base[:, None]  # [query i, key j]
        for s in range(n_steps):
            index = (base + s + 1).clamp(max=n - 1)
            step_tokens = tokens[:, index]
            q, k, v = self.qkv(step_tokens, g, (base + s)[None, :].expand(b, n))
            k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
            if s == 0:
                keys0, vals0 = k, v
            else:
                chain_k.append(k)
                chain_v.append(v)
            scores = torch.einsum("bihd,bjhd->bhij", q, keys0) * scale
            scores = scores.masked_fill(~(causal[None, None] & mask[:, None, None, :]), float("-inf"))
            diag = [torch.einsum("bihd,bihd->bhi", q, ck)[..., None] * scale for ck in chain_k]
            weights = torch.softmax(torch.cat([scores] + diag, dim=-1), dim=-1)
            attended = torch.einsum("bhij,bjhd->bihd", weights[..., :n], vals0)
            for t, cv in enumerate(chain_v):
                attended = attended + weights[..., n + t].permute(0, 2, 1)[..., None] * cv
            logits, g = self.finish(attended.reshape(b, n, N_HEAD * HEAD_DIM), g)
            out.append(logits)
        return out


# --- data -----------------------------------------------------------------------------------------

class Texts:
    """Every text of some shards: tokens, offsets, features and the teacher's top tokens."""

    def __init__(self, paths: list[Path]) -> None:
        shards = [np.load(p) for p in paths]
        self.tokens = np.concatenate([s["tokens"] for s in shards])
        starts = np.cumsum([0] + [len(s["tokens"]) for s in shards[:-1]])
        self.offsets = np.concatenate([s["offsets"][:-1] + a for s, a in zip(shards, starts)] + [[len(self.tokens)]])
        self.features = np.concatenate([s["features"] for s in shards])
        self.top_ids = np.concatenate([s["top_ids"] for s in shards])
        self.top_p = np.concatenate([s["top_p"] for s in shards]).astype(np.float32)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, which: list[int], t2d: np.ndarray) -> dict[str, torch.Tensor]:
        n = max(int(self.offsets[i + 1] - self.offsets[i]) for i in which)
        b = len(which)
        tokens = np.zeros((b, n), dtype=np.int64)
        features = np.zeros((b, n, 3 * N_EMBD), dtype=np.float32)
        ids = np.zeros((b, n, self.top_ids.shape[1]), dtype=np.int64)
        probs = np.zeros((b, n, self.top_ids.shape[1]), dtype=np.float32)
        lengths = np.zeros(b, dtype=np.int64)
        for row, i in enumerate(which):
            a, z = int(self.offsets[i]), int(self.offsets[i + 1])
            lengths[row] = z - a
            tokens[row, :z - a] = self.tokens[a:z]
            features[row, :z - a] = self.features[a:z]
            d = t2d[self.top_ids[a:z]]
            ids[row, :z - a] = np.maximum(d, 0)
            probs[row, :z - a] = np.where(d >= 0, self.top_p[a:z], 0.0)
        return {"tokens": torch.from_numpy(tokens), "features": torch.from_numpy(features),
                "ids": torch.from_numpy(ids), "probs": torch.from_numpy(probs), "lengths": torch.from_numpy(lengths)}


def draft_vocabulary(texts: Texts, size: int, n_vocab: int) -> np.ndarray:
    """The ``size`` tokens with the most teacher probability over all positions, in id order (``d2t``)."""
    mass = np.bincount(texts.top_ids.ravel(), weights=texts.top_p.ravel(), minlength=n_vocab)
    return np.sort(np.argsort(-mass)[:size])


def step_losses(logits: list[torch.Tensor], batch: dict[str, torch.Tensor]):
    """Per step: the soft cross-entropy against the teacher and the share of rows whose first guess is
    the teacher's likeliest token (over rows whose target row exists)."""
    n = batch["tokens"].shape[1]
    base = torch.arange(n)
    out = []
    for s, z in enumerate(logits):
        target = (base + s + 1)
        valid = target[None, :] < batch["lengths"][:, None]
        target = target.clamp(max=n - 1)
        ids, probs = batch["ids"][:, target], batch["probs"][:, target]
        logp = torch.log_softmax(z, dim=-1)
        loss_rows = -(probs * logp.gather(-1, ids)).sum(-1)
        best_ok = probs[..., 0] > 0  # the teacher's likeliest token is in the draft vocabulary
        hit = (z.argmax(-1) == ids[..., 0]) & best_ok
        count = valid.sum().clamp(min=1)
        out.append(((loss_rows * valid).sum() / count, ((hit & valid).sum() / count).item(), int(valid.sum())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3, help="training-time-test steps")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    answers = sorted(args.data.glob("answers_*.npz"))
    held_out = Texts(answers[-1:])
    train = Texts(sorted(args.data.glob("plain_*.npz")) + answers[:-1])
    embeddings = np.load(args.data / "embeddings.npy").astype(np.float32)
    d2t = draft_vocabulary(train, DRAFT_VOCAB, len(embeddings))
    t2d = np.full(len(embeddings), -1, dtype=np.int64)
    t2d[d2t] = np.arange(len(d2t))
    head = Head(embeddings, d2t)
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    order = np.argsort([train.offsets[i + 1] - train.offsets[i] for i in range(len(train))])
    batches = [list(order[i:i + args.batch]) for i in range(0, len(order), args.batch)]
    total = args.epochs * len(batches)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda k: min(1.0, (k + 1) / 100) * max(0.05, 1 - k / total))
    rng = np.random.default_rng(0)
    print(json.dumps({"train_tokens": len(train.tokens), "held_out_tokens": len(held_out.tokens),
                      "teacher_mass_in_draft_vocab": round(float(train.top_p[np.isin(train.top_ids, d2t)].sum()
                                                                  / train.top_p.sum()), 4)}), flush=True)
    for epoch in range(args.epochs):
        started = time.monotonic()
        head.train()
        for k in rng.permutation(len(batches)):
            batch = train.batch(batches[k], t2d)
            mask = torch.arange(batch["tokens"].shape[1])[None, :] < batch["lengths"][:, None]
            losses = step_losses(head(batch["features"], batch["tokens"], mask, args.steps), batch)
            loss = sum(STEP_DECAY**s * value for s, (value, _, _) in enumerate(losses))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
        print(json.dumps({"epoch": epoch, "seconds": round(time.monotonic() - started),
                          "held_out_top1_per_step": evaluate(head, held_out, t2d, args.steps)}), flush=True)
        save(head, d2t, args.out)


@torch.no_grad()
def evaluate(head: Head, texts: Texts, t2d: np.ndarray, n_steps: int) -> list[float]:
    head.eval()
    hits, counts = np.zeros(n_steps), np.zeros(n_steps)
    for begin in range(0, len(texts), 8):
        batch = texts.batch(list(range(begin, min(len(texts), begin + 8))), t2d)
        mask = torch.arange(batch["tokens"].shape[1])[None, :] < batch["lengths"][:, None]
        for s, (_, share, count) in enumerate(step_losses(head(batch["features"], batch["tokens"], mask, n_steps),
                                                          batch)):
            hits[s] += share * count
            counts[s] += count
    return [round(float(h / max(c, 1)), 4) for h, c in zip(hits, counts)]


def save(head: Head, d2t: np.ndarray, path: Path) -> None:
    """The weights by their llama.cpp names, ``[out, in]`` as GGUF's numpy layout wants them."""
    w = {name: t.detach().numpy().astype(np.float32) for name, t in head.named_parameters()}
    np.savez(path, d2t=d2t.astype(np.int64), **w)


if __name__ == "__main__":
    main()
