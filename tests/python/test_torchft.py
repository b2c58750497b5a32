"""torchft over ringx (ringx.torchft.ProcessGroupRingx): a DDP job of 4 replica processes, one
SIGKILLed mid-run and another started in its place (tests/python/torchft_job.py). The survivors
keep committing steps, the newcomer heals from a peer, and every replica ends with the weights
of plain SGD over the same committed steps (each step's batch is the same in every replica, so
the replicas' average gradient is each one's whoever took part)."""

import torch

import torchft_job  # beside this file; needs torchft, which scripts/requirements.txt installs


def test_a_replica_killed_and_replaced_the_others_go_on_and_agree(tmp_path):
    result = torchft_job.run("ringx", str(tmp_path))
    assert result["errors"] == [], result["errors"]
    assert result["kill_time"] is not None
    # The survivors committed a step after the kill, within the Lighthouse's heartbeat timeout
    # (1 s here) and a margin, and lost no committed step.
    assert result["recovered_s"] is not None and result["recovered_s"] < 10, result
    weights = result["weights"]
    assert len(weights) == 4  # three survivors and the newcomer
    reference = torchft_job.reference_weights(result["steps"])
    for w in weights:
        for name, value in reference.items():
            torch.testing.assert_close(w[name], value, rtol=1e-5, atol=1e-6)
