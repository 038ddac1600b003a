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

# OpenMPI 4.1 (Debian 12's) keeps each job's session directory, a one-rank
# run's too, under TMPDIR/ompi.HOST.UID, and removes that directory when a
# job ends and leaves it empty: a job starting just then can find it gone
# between its mkdir and its check and fail in MPI_Init ("A call to mkdir was
# unable to create the desired directory ... File exists"; open-mpi/ompi
# #8510), as two lit workers' runs now and then did. The tests' jobs keep
# their session directories under one base whose top directory always holds
# a file, so that no job ends it: one its cleanup keeps, a non-empty
# "output-" file (orte_dir_check_file).
import socket
import tempfile

ompi_base = os.path.join(tempfile.gettempdir(), "shardc-lit-ompi.%d" % os.getuid())
ompi_host = socket.gethostname()
if not ompi_host.replace(".", "").isdigit():  # OpenMPI's short name
    ompi_host = ompi_host.split(".")[0]
ompi_top = os.path.join(ompi_base, "ompi.%s.%d" % (ompi_host, os.getuid()))
os.makedirs(ompi_top, exist_ok=True)
with open(os.path.join(ompi_top, "output-shardc-lit"), "w") as keep:
    keep.write("keeps this directory: test/lit.cfg.py\n")
config.environment["OMPI_MCA_orte_tmpdir_base"] = ompi_base

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
