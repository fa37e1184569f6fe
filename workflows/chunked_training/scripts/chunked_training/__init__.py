"""The chunked-training workflow's Python side: MLDAG-style vars fanned out to runs, the chunks of
a run, and the training-command contract (docs/bring_your_own_training.md)."""
