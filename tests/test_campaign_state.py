"""A campaign's state kept between sessions (bench/campaign_state.py): packed without the problems' sources,
unpacked with them put back from a checkout, refused when a problem file is not the one the campaign ran."""

from __future__ import annotations

import json
import sqlite3
import tarfile

from bench import campaign_state

SOURCE = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
          "        return torch.relu(x) * 2.0 + x.sum(dim=1, keepdim=True)\n\nbatch_size = 4096\n"
          "def get_inputs():\n    return [torch.rand(batch_size, 1024)]\n")


def _campaign(root):
    d = root / "D"
    (root / "KernelBench" / "level2").mkdir(parents=True)
    (root / "KernelBench" / "level2" / "1_Relu.py").write_text(SOURCE)
    (d / "home" / "logs").mkdir(parents=True)
    (d / "home" / "logs" / "worker.log").write_text(SOURCE)  # the host's: left out
    (d / "campaign.json").write_text(json.dumps({"problems": [
        {"name": "L2_1_Relu", "path": "../x/KernelBench/level2/1_Relu.py", "source": SOURCE}]}, indent=1))
    conn = sqlite3.connect(d / "home" / "adaexplore.sqlite3")
    conn.execute("CREATE TABLE tasks (task_id TEXT, source TEXT)")
    conn.execute("CREATE TABLE nodes (node_id INTEGER, kernel_source TEXT)")
    conn.execute("INSERT INTO tasks VALUES ('t1', ?)", (SOURCE,))
    conn.execute("INSERT INTO nodes VALUES (1, 'class ModelNew: batch_size = 4096')")
    conn.commit()
    conn.close()
    folder = d / "briefs" / "L2_1_Relu__adaexplore"
    folder.mkdir(parents=True)
    (folder / "round-1.json").write_text(json.dumps({"step_id": "s1", "reference_source": SOURCE}, indent=1))
    (folder / "reference.py").write_text(SOURCE)
    (d / "proposals" / "L2_1_Relu__adaexplore").mkdir(parents=True)
    (d / "proposals" / "L2_1_Relu__adaexplore" / "s1.py").write_text("class ModelNew: pass\n")
    return d


def test_pack_leaves_every_source_out_and_unpack_puts_it_back(tmp_path):
    d = _campaign(tmp_path)
    out = tmp_path / "state.tgz"
    assert campaign_state.main(["pack", "--dir", str(d), "--out", str(out)]) == 0
    with tarfile.open(out) as tar:
        names = tar.getnames()
        blobs = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    assert "D/home/logs/worker.log" not in names and "D/proposals/L2_1_Relu__adaexplore/s1.py" in names
    assert not any(b"torch.relu(x) * 2.0" in b or b"torch.relu(x) * 2.0" in b.replace(b"\\n", b"\n") for b in blobs)
    back = tmp_path / "again" / "D"
    assert campaign_state.main(["unpack", "--state", str(out), "--dir", str(back), "--problems", str(tmp_path)]) == 0
    assert (back / "briefs" / "L2_1_Relu__adaexplore" / "reference.py").read_text() == SOURCE
    assert json.loads((back / "briefs" / "L2_1_Relu__adaexplore" / "round-1.json").read_text())["reference_source"] \
        == SOURCE
    assert json.loads((back / "campaign.json").read_text())["problems"][0]["source"] == SOURCE
    conn = sqlite3.connect(back / "home" / "adaexplore.sqlite3")
    assert conn.execute("SELECT source FROM tasks").fetchone()[0] == SOURCE
    assert conn.execute("SELECT kernel_source FROM nodes").fetchone()[0] == "class ModelNew: batch_size = 4096"


def test_unpack_refuses_a_problem_file_that_is_not_the_one_run_and_an_existing_folder(tmp_path, capsys):
    d = _campaign(tmp_path)
    out = tmp_path / "state.tgz"
    campaign_state.main(["pack", "--dir", str(d), "--out", str(out)])
    (tmp_path / "KernelBench" / "level2" / "1_Relu.py").write_text(SOURCE.replace("4096", "8192"))
    back = tmp_path / "again" / "D"
    assert campaign_state.main(["unpack", "--state", str(out), "--dir", str(back), "--problems", str(tmp_path)]) == 1
    assert "is not the file this campaign ran" in capsys.readouterr().err and not back.exists()
    assert campaign_state.main(["unpack", "--state", str(out), "--dir", str(d), "--problems", str(tmp_path)]) == 1
    assert "exists" in capsys.readouterr().err
