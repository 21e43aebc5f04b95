# The PyTorch references (Debian's python3-torch, never a dependency of the trainer): ref_model writes one
# batch, the weights, loss, gradients and optimizer steps of each model to HDF5 and compare_model.py
# replays them in torch; replay_ddp.py (tests/integration/train-replay.sh) and eval_saved_model.py
# (train-accuracy.sh) check whole runs and saved models; pytorch_ddp_mnist.py is the benchmarks' peer (PyTorch's
# DDP example), pytorch_tuned_mnist.py the GPU benchmark's tuned one.
check_PROGRAMS += tests/reference/ref_model
TESTS += tests/reference/compare_model.py
EXTRA_DIST += tests/reference/compare_model.py tests/reference/rng.py tests/reference/replay_ddp.py \
	tests/reference/eval_saved_model.py tests/reference/pytorch_ddp_mnist.py tests/reference/pytorch_tuned_mnist.py
