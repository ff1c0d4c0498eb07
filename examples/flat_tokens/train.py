"""A nanoGPT-style loop over a flat token export, in schedule order, interrupted and resumed.

nanoGPT's ``get_batch`` draws random windows from ``np.memmap("train.bin")``,
which throws the schedule's order away. To train in ClusterClip order, read the
file sequentially instead: batch ``b`` is windows ``b * B .. (b + 1) * B - 1`` of
``BLOCK + 1`` tokens. The only resume state is how many tokens were consumed
(saved in the checkpoint next to the model and optimizer).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from clusterclip.adapters.flat import FlatTokens

BLOCK, BATCH, STEPS, STOP = 32, 4, 12, 5


def batches(data: FlatTokens, *, start: int):
    """Sequential (x, y) batches from token offset ``start``; yields (x, y, next offset)."""
    windows = data.windows(BLOCK, start=start)
    while True:
        chunk = [w for _, w in zip(range(BATCH), windows, strict=False)]
        if len(chunk) < BATCH:
            return
        stacked = torch.from_numpy(np.stack(chunk).astype(np.int64))
        start += BATCH * BLOCK
        yield stacked[:, :-1], stacked[:, 1:], start


def train(data: FlatTokens, checkpoint: Path, *, until: int) -> list[list[int]]:
    """Train (or resume) a bigram model until step ``until``; return the batches it read."""
    torch.manual_seed(0)
    vocab = data.meta["tokenizer"]["vocab_size"]
    model = torch.nn.Embedding(vocab, vocab // 64)  # a tiny factored bigram model
    head = torch.nn.Linear(vocab // 64, vocab)
    optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-2)
    step, start = 0, 0
    if checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        head.load_state_dict(state["head"])
        optimizer.load_state_dict(state["optimizer"])
        step, start = state["step"], state["tokens_consumed"]
        print(f"resumed at step {step}, token offset {start}")
    seen = []
    for x, y, offset in batches(data, start=start):
        loss = torch.nn.functional.cross_entropy(head(model(x)).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen.append(x.flatten().tolist())
        step += 1
        if step == until:
            state = {"model": model.state_dict(), "head": head.state_dict(),
                     "optimizer": optimizer.state_dict(), "step": step, "tokens_consumed": offset}  # fmt: skip
            torch.save(state, checkpoint)
            print(f"step {step}: loss {loss.item():.3f}, checkpoint at token offset {offset}")
            break
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a flat-tokens export")
    parser.add_argument("--checkpoint", type=Path, required=True)
    args = parser.parse_args()
    data = FlatTokens(args.data)
    print(json.dumps({k: data.meta[k] for k in ("dtype", "n_positions", "n_tokens")}))
    tokenizer = data.meta["tokenizer"]
    print(f"tokenizer {tokenizer['name_or_path']} (vocab {tokenizer['vocab_size']}, "
          f"end of document {tokenizer['eos_token']!r} = {tokenizer['eos_id']})")  # fmt: skip

    args.checkpoint.unlink(missing_ok=True)
    first = train(data, args.checkpoint, until=STOP)  # "crashes" after the checkpoint
    rest = train(data, args.checkpoint, until=STEPS)
    # What an uninterrupted loop reads: the file from offset 0, in order.
    expected = [x.flatten().tolist() for x, _, _ in batches(data, start=0)][:STEPS]
    if first + rest != expected:
        print("FAILED: the resumed loop did not continue the token stream", file=sys.stderr)
        return 1
    document = data.document(int(np.searchsorted(data.offsets, STOP * BATCH * BLOCK, "right")) - 1)
    print(f"first document after the resume point: {len(document)} tokens, ends with "
          f"{int(document[-1])}")  # fmt: skip
    print(f"ok: {STEPS} steps read the token stream in schedule order across the resume")
    return 0


if __name__ == "__main__":
    sys.exit(main())
