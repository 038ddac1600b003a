# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "SHARDC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.shardc_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# FileCheck, not and count live in the LLVM tools dir, which is not on PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.shardc_tools_dir, append_path=True)

tool_dirs = [config.shardc_tools_dir, config.llvm_tools_dir]
tools = ["shardc-opt", "shardc-gen", "shardc-translate"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The driver and the e2e helpers.
import sys

config.substitutions.append(("%shardc", os.path.join(config.shardc_tools_dir, "shardc")))
config.substitutions.append(("%python", sys.executable))
# OpenMPI as root on a machine with fewer cores than ranks (PLATFORM.md); a
# rank that exits non-zero ends the job at once, not after the default 1 s
# before mpirun kills the others.
config.substitutions.append(
    ("%mpirun", "mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1"
                " --mca odls_base_sigkill_timeout 0"))
config.environment["OPENBLAS_NUM_THREADS"] = "1"

# target=cuda is built where nvcc and NCCL are (no GPU needed); running its
# executables needs a GPU.
import shutil
import subprocess

# cudasim (runtime/cudasim) runs the CUDA kernels on the CPU, and with
# nccl.h target=cuda's executables too (--target cudasim).
if config.shardc_cudasim_available:
    config.available_features.add("cudasim")
if config.shardc_rt_cudasim_available:
    config.available_features.add("cudasim-target")

if config.shardc_cuda_available:
    config.available_features.add("cuda-compiler")
    # cuDNN and the stub libcuda in the toolkit: cuDNN's heuristics run
    # without a GPU.
    if config.shardc_cudnn_available:
        config.available_features.add("cudnn")
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True).returncode == 0:
        config.available_features.add("cuda")
