# A stand-in for a training script (the README's first example): prints what gpusched gives
# a task. Run it with `gpusched submit --gpus 2 -- python3 examples/train.py`.
import os

print("training on GPUs", os.environ.get("CUDA_VISIBLE_DEVICES"), "of",
      os.environ.get("GPUSCHED_NODE"), "in", os.getcwd())
