"""NIC sharing of KV transfers leaving one prefill DP rank (simcast.serving.disagg.nic), by hand."""

import math

import pytest

from simcast.serving.disagg.nic import NicQueues, nic_wait_s


def test_two_equal_transfers_on_one_nic_take_twice_as_long():
    lat, data = 10e-6, 4e-3
    q = NicQueues()
    first = q.finish(0, 0.0, lat + data, data)
    second = q.finish(0, 0.0, lat + data, data)
    assert first == pytest.approx(lat + data)
    assert second == pytest.approx(lat + 2 * data)  # the pair: twice the data time in total
    # another prefill rank's NICs are free: its transfer is costed alone
    assert q.finish(1, 0.0, lat + data, data) == pytest.approx(lat + data)
    # a transfer ready after the NIC drained waits for nothing
    assert q.finish(0, 1.0, lat + data, data) == pytest.approx(1.0 + lat + data)


def test_nic_wait_is_md1_by_hand():
    # 100 transfers/s of 5 ms: rho 0.5, W = rho * d / (2 (1 - rho)) = 0.5 * 5 ms / 1 = 2.5 ms
    assert nic_wait_s(100.0, 5e-3) == pytest.approx(2.5e-3)
    assert nic_wait_s(0.0, 5e-3) == 0.0 and nic_wait_s(100.0, 0.0) == 0.0  # an infinitely fast link: no wait
    assert math.isinf(nic_wait_s(200.0, 5e-3))  # rho = 1: the NICs cannot carry the rate
