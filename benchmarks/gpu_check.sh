#!/usr/bin/env bash
# The GPU check: the engine on CUDA and the GPU speed numbers, in a few minutes on one GPU (budget: 8).
#
#   bash benchmarks/gpu_check.sh          on a machine with a CUDA GPU
#   bash benchmarks/gpu_check.sh --cpu    every step cut short on the CPU (a few minutes): checks that the script runs
#
# PYTHON names the interpreter (default: python) of an environment with fedavail's dependencies installed
# (pip install -c requirements.lock -e '.[test]'; add '.[bench]' for the FedLab arm, else that arm is left out).
# Steps: (1) tests/test_engine_device.py on the device: keyed minibatch streams, loop == vmap (float64 and float32),
# channels-last kernels against contiguous ones; (2) benchmarks/round_cost.py: fedavail round against a plain loop,
# and vmap against the per-client loop at 100 participants (target >= 5x); (3) benchmarks/peers.py: fedavail,
# FedLab 1.3.0 and a plain loop; (4) benchmarks/synthetic_run.py: a 200-round FedSWE SVHN-CNN run on synthetic
# SVHN-shaped data, seconds per round; (5) benchmarks/many_seeds.py: three seeds in one process (one vmap over all
# seeds' clients) against three separate runs, in float64 (the metrics must agree to ~1e-9) and float32 (wall time);
# (6) benchmarks/step_cost.py: per-sample cost of a client step at the configs' batch sizes, loop and vmap, against
# the large-batch floor, and the back end the engine picks; (7) benchmarks/algorithm_cost.py: every algorithm's round
# against FedAvg's, with its state memory; (8) benchmarks/roofline.py: the local step's GFLOP/s against the device's
# own matrix-product rate, per model and batch as the configs train them.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PYTHON=${PYTHON:-python}

if [[ "${1:-}" == "--cpu" ]]; then
    DEVICE=cpu
    # One thread: a shared CPU's oversubscribed OpenMP threads make 2-thread steps erratic (10x slower).
    ROUND_COST=(--repeats 1 --workloads 4x32 --vmap-clients 2 --threads 1)
    PEERS=(--repeats 1 --workloads 4x32 --threads 1)
    RUN=(--rounds 2 --local-steps 1 --threads 1)
    MANY_SEEDS=(--seeds 2 --rounds 2 --local-steps 1 --threads 1)
    MANY_SEEDS_TIMED=("${MANY_SEEDS[@]}")
    STEP_COST=(--repeats 1 --threads 1 --workloads small_cnn@16x10)
    ALGORITHM_COST=(--repeats 1 --rounds 1 --threads 1)
    ROOFLINE=(--repeats 1 --threads 1 --workloads "small_cnn@16 sgd x10")
elif [[ $# -eq 0 ]]; then
    DEVICE=cuda
    ROUND_COST=(--repeats 3 --vmap-clients 100)
    PEERS=(--repeats 3)
    RUN=(--rounds 200)
    MANY_SEEDS=(--seeds 3 --rounds 5)
    MANY_SEEDS_TIMED=(--seeds 3 --rounds 30)
    STEP_COST=(--repeats 3)
    ALGORITHM_COST=(--repeats 3 --rounds 10)
    ROOFLINE=(--repeats 3)
else
    echo "usage: bash benchmarks/gpu_check.sh [--cpu]" >&2
    exit 2
fi

started=$SECONDS
step() { printf '\n== %s (%d s so far) ==\n' "$*" $((SECONDS - started)); }

"$PYTHON" - "$DEVICE" <<'EOF'
import sys, torch
device = sys.argv[1]
if device == "cuda" and not torch.cuda.is_available():
    sys.exit("no CUDA device visible: run with --cpu to check the script on the CPU")
name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
print(f"torch {torch.__version__} on {name}, {torch.get_num_threads()} CPU threads")
EOF

step "1. engine tests on $DEVICE"
FEDAVAIL_TEST_DEVICE=$DEVICE timeout 300 "$PYTHON" -m pytest tests/test_engine_device.py -q -p no:cacheprovider

step "2. round cost on $DEVICE"
timeout 240 "$PYTHON" benchmarks/round_cost.py --device "$DEVICE" "${ROUND_COST[@]}"

step "3. peers on $DEVICE"
ARMS=(fedavail fedavail-contiguous fedlab plain-loop)
if ! "$PYTHON" -c "import fedlab" 2>/dev/null; then
    echo "FedLab is not installed (pip install -e '.[bench]'): the fedlab arm is left out"
    ARMS=(fedavail fedavail-contiguous plain-loop)
fi
timeout 180 "$PYTHON" benchmarks/peers.py --device "$DEVICE" --arms "${ARMS[@]}" "${PEERS[@]}"

step "4. FedSWE SVHN CNN run on synthetic SVHN-shaped data on $DEVICE"
timeout 180 "$PYTHON" benchmarks/synthetic_run.py --device "$DEVICE" "${RUN[@]}"

step "5. many seeds in one process against separate runs on $DEVICE"
timeout 150 "$PYTHON" benchmarks/many_seeds.py --device "$DEVICE" --dtype float64 "${MANY_SEEDS[@]}"
timeout 150 "$PYTHON" benchmarks/many_seeds.py --device "$DEVICE" --dtype float32 "${MANY_SEEDS_TIMED[@]}"

step "6. step cost against the large-batch floor on $DEVICE"
timeout 240 "$PYTHON" benchmarks/step_cost.py --device "$DEVICE" "${STEP_COST[@]}"

step "7. every algorithm's round against FedAvg's on $DEVICE"
timeout 180 "$PYTHON" benchmarks/algorithm_cost.py --device "$DEVICE" "${ALGORITHM_COST[@]}"

step "8. roofline: the local step against the matrix-product rate on $DEVICE"
timeout 240 "$PYTHON" benchmarks/roofline.py --device "$DEVICE" "${ROOFLINE[@]}"

step "done"
