"""The README's PyTorch example runs as written: the first ```python block after the
`readme-example` marker, in a fresh interpreter, on the CPU (CUDA hidden); on a GPU also with the
overlap block that follows it."""

import os
import re
import subprocess
import sys

from conftest import c_cuda_missing, gpu_mark

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
MARKER = "<!-- readme-example:"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def readme_blocks():
    """The python blocks of the README from the marker on (the example, then the overlap)."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start = text.find(MARKER)
    assert start >= 0, f"README.md has no '{MARKER}' marker before its PyTorch example"
    blocks = BLOCK.findall(text, start)
    assert blocks, "README.md has no ```python block after its example marker"
    return blocks


def run(code, env):
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"the README example failed:\n{proc.stderr}"
    return proc.stdout


def test_readme_example_runs_on_cpu():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = run(readme_blocks()[0], env)
    # The shape of the new streams, then token 0's comb column sums (a Sinkhorn ends on columns).
    assert "torch.Size([8, 4, 5120])" in out, out
    sums = [float(v) for v in re.findall(r"\d+\.\d+", out.split("tensor(")[1])]
    assert len(sums) == 4 and all(abs(s - 1) < 1e-4 for s in sums), out


@gpu_mark(c_cuda_missing())
def test_readme_example_and_overlap_run_on_gpu():
    example, overlap = readme_blocks()[:2]
    out = run(example + overlap + "\ntorch.cuda.synchronize()\nprint(residual.device)\n",
              dict(os.environ))
    assert out.rstrip().endswith("cuda:0"), out
