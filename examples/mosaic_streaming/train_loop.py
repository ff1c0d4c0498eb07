"""A training loop that reads a clusterclip MDS export with mosaicml-streaming.

The reading contract (docs/adapters.md, "MosaicML streaming"): ``shuffle=False``,
``num_canonical_nodes=1`` and the loader's ``batch_size`` on the dataset too.
Then global step ``t`` is schedule positions ``[t*W*B, (t+1)*W*B)`` on W ranks;
this loop runs on one rank, so it reads the schedule itself, in order. Each
sample carries its schedule ``position``, which the loop checks.

    python train_loop.py MDS_DIR --stop-after 5 --state state.json   # first run
    python train_loop.py MDS_DIR --resume state.json                 # restarted job
"""

import argparse
import json

from streaming import StreamingDataLoader, StreamingDataset

BATCH = 8

parser = argparse.ArgumentParser()
parser.add_argument("mds")
parser.add_argument("--stop-after", type=int, default=None, help="steps before stopping")
parser.add_argument("--state", help="where to save the loader state when stopping")
parser.add_argument("--resume", help="a saved loader state to continue from")
args = parser.parse_args()

dataset = StreamingDataset(local=args.mds, shuffle=False, num_canonical_nodes=1, batch_size=BATCH)
loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=2)
first = 0
if args.resume:
    with open(args.resume) as handle:
        state = json.load(handle)
    loader.load_state_dict(state)
    first = state["sample_in_epoch"]

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
