# lit configuration for Sluice's IR and tool tests.

import os
import shutil
import sys

import lit.formats

config.name = "Sluice"
# bash, not lit's internal shell: tests pipe and loop over example files.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "unittests", "fuzz", "bin", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
# The NCCL-emulation run (below) keeps its outputs apart: ctest runs it
# beside the plain one, and both would write the same %t directories.
config.test_exec_root = os.path.join(
    config.sluice_obj_root,
    "test-nccl-emulation" if lit_config.params.get("transport") == "nccl"
    else "test")

# The tests' mpirun and sluice-run wrappers (a private Open MPI session
# directory per launch), Sluice's tools, then FileCheck, not and count from
# LLVM.
config.environment["PATH"] = os.pathsep.join(
    [
        os.path.join(config.test_source_root, "bin"),
        config.sluice_tools_dir,
        config.llvm_tools_dir,
        config.environment.get("PATH", ""),
    ]
)
config.substitutions.append(("%examples", os.path.join(config.sluice_src_root, "examples")))
# sluice-plot as a file, for the tests that run it with another Python
# (build/hf-venv's, which has tensorboardX).
config.substitutions.append(("%sluice_plot", os.path.join(config.sluice_tools_dir, "sluice-plot")))
config.substitutions.append(("%bench", os.path.join(config.sluice_src_root, "bench")))
config.substitutions.append(("%python", sys.executable))
# The part of sluice-run's step lines a resumed or repartitioned run must
# repeat (step, loss, learning rate, gradient norm), without the timings.
config.substitutions.append(("%losses", "grep '^step' | cut -d'|' -f1-3"))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# mpirun as root in containers, without probing for networks, and yielding
# the CPU while waiting (tests oversubscribe 2 cores with 4 ranks).
for name, value in [
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
    ("OMPI_MCA_mpi_yield_when_idle", "1"),
    ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
]:
    config.environment[name] = value
config.excludes.append("check-equivalence.sh")

# --param transport=nccl: every sluice-run without --transport runs over
# the NCCL emulation (docs/communication.md); the equivalence tests, which
# run both transports themselves, and tests of a transport's own messages
# say `UNSUPPORTED: nccl-emulation`.
if lit_config.params.get("transport") == "nccl":
    config.environment["SLUICE_TRANSPORT"] = "nccl"
    config.available_features.add("nccl-emulation")

# A real SLURM for test/slurm (bash setup.sh test installs Debian's
# slurmctld, slurmd and munge): scheduler.py starts the daemons on this
# host, which takes root (slurmd starts every job's processes).
if os.geteuid() == 0 and all(
        shutil.which(tool) for tool in
        ["slurmctld", "slurmd", "munged", "sbatch", "srun", "salloc",
         "scontrol", "scancel", "sinfo"]):
    config.available_features.add("slurm")

# transformers over torch, and the tokenizer libraries (bash setup.sh test
# makes build/hf-venv): the Hugging Face tests need them and are skipped,
# saying why, without.
hf_python = os.path.join(config.sluice_obj_root, "hf-venv", "bin", "python")
if os.path.exists(hf_python):
    config.substitutions.append(("%hfpython", hf_python))
for feature, modules in [("transformers", "torch, transformers"),
                         ("hf-tokenizers", "tokenizers, sentencepiece"),
                         ("tensorboardx", "tensorboardX")]:
    if os.path.exists(hf_python) and os.system(
            hf_python + ' -c "import ' + modules + '" >/dev/null 2>&1') == 0:
        config.available_features.add(feature)
    else:
        lit_config.note(
            modules + " not importable in build/hf-venv (bash setup.sh test "
            "installs them from PyPI): the tests that need them are skipped")

# transformers 4.51 (the first with Qwen3) in its own venv over the same
# torch (build/hf-venv-qwen3; test/hf/torch_compat.py lets it import over
# torch 1.13): the Qwen3 equivalence test needs it.
qwen3_python = os.path.join(config.sluice_obj_root, "hf-venv-qwen3", "bin",
                            "python")
if os.path.exists(qwen3_python):
    config.substitutions.append(("%qwen3python", qwen3_python))
if os.path.exists(qwen3_python) and os.system(
        qwen3_python + ' -c "import sys; sys.path.insert(0, \'' +
        os.path.join(config.test_source_root, "hf") +
        '\'); import torch_compat, transformers; '
        'transformers.Qwen3ForCausalLM" >/dev/null 2>&1') == 0:
    config.available_features.add("transformers-qwen3")
else:
    lit_config.note("transformers with Qwen3 is not importable in "
                    "build/hf-venv-qwen3 (bash setup.sh test installs it "
                    "from PyPI): the Qwen3 equivalence test is skipped")

# Debian's matplotlib, which sluice-plot (a /usr/bin/python3 script) uses.
if os.system('/usr/bin/python3 -c "import matplotlib" >/dev/null 2>&1') == 0:
    config.available_features.add("matplotlib")
else:
    lit_config.note("python3-matplotlib is not installed: sluice-plot's "
                    "test is skipped")

if config.sluice_cuda_enabled:
    config.available_features.add("cuda")
