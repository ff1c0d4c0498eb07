"""A training loop that reads a clusterclip LitData export.

The export was laid out for this reader (``--world-size 1 --loader-workers 2
--loader-batch-size 8``): LitData hands each DataLoader worker one contiguous run of
items, and the layout puts the draws where that reading gives the schedule back
(docs/adapters.md, "LitData"). Each item carries its schedule ``position``,
which the loop checks.

    python train_loop.py LIT_DIR --stop-after 5 --state state.json   # first run
    python train_loop.py LIT_DIR --resume state.json                 # restarted job
"""

import argparse
import json

from litdata import StreamingDataLoader, StreamingDataset

BATCH, WORKERS = 8, 2  # as exported

parser = argparse.ArgumentParser()
parser.add_argument("lit")
parser.add_argument("--stop-after", type=int, default=None, help="steps before stopping")
parser.add_argument("--state", help="where to save the loader state when stopping")
parser.add_argument("--resume", help="a saved loader state to continue from")
args = parser.parse_args()

dataset = StreamingDataset(args.lit, shuffle=False)
loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)
first = 0
if args.resume:
    with open(args.resume) as handle:
        state = json.load(handle)
    loader.load_state_dict(state)
    first = state["num_samples_yielded"]

expected = first
steps = words = 0
for steps, batch in enumerate(loader, start=1):
    positions = [int(p) for p in batch["position"]]
    assert positions == list(range(expected, expected + len(positions))), positions
    expected += len(positions)
    words += sum(len(text.split()) for text in batch["text"])  # the "training step"
    if steps == args.stop_after:
        with open(args.state, "w") as handle:
            json.dump(loader.state_dict(), handle)
        print(f"stopped after {steps} steps at schedule position {expected}; state saved")
        break
else:
    print(
        f"{'resumed at' if args.resume else 'started at'} position {first}: read {expected - first}"
        f" draws in schedule order ({steps} steps, {words} words), through position {expected - 1}"
    )
