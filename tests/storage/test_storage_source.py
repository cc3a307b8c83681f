"""Mining input on an iSCSI LUN (clusterlab.storage.source): the layout, the URL, and (root)
HPA/PFP/CD reading their partitions from the target give byte-identical results."""

from __future__ import annotations

import pytest

from clusterlab.errors import ConfigError
from clusterlab.storage.source import check_url, layout, pack_header, parse_url, unpack_header


@pytest.mark.parametrize("url", ["iscsi://", "iscsi://10.0.0.3/x/1", "iscsi://10.0.0.3/iqn.a:b/one",
                                 "iscsi://10.0.0.3:99999/iqn.a:b/1", "iscsi://10.0.0.3/iqn.a:b"])
def test_bad_url_is_refused_naming_it(url):
    with pytest.raises(ConfigError, match="iscsi://"):
        check_url(url, 2)


def test_header_round_trip_and_refusals():
    regions = layout([100, 0, 70000])
    assert regions == [(65536, 100), (131072, 0), (196608, 70000)]
    assert unpack_header(pack_header(regions)) == regions
    with pytest.raises(ConfigError, match="no clusterlab partition header"):
        unpack_header(bytes(4096))
    with pytest.raises(ConfigError, match="partitions"):
        pack_header([])
    assert parse_url("iscsi://10.0.0.3:3261/iqn.x:y.shared/2").portal == "10.0.0.3:3261"


def test_mining_from_the_target_equals_mining_the_file(tmp_path):
    from .test_storage_root import _require

    _require()
    import clusterlab
    from clusterlab.cluster.testbed import StarTopo, Testbed, clean
    from clusterlab.cluster.testbed.node import in_netns
    from clusterlab.cluster.testbed.storage import IscsiTarget, clean_storage, storage_leftovers
    from clusterlab.mining.parallel import mine_parallel
    from clusterlab.storage.source import lun_bytes_needed, partition_ranges, write_partitions

    from ..testbed.helpers import fresh_name

    data = tmp_path / "t.dat"
    clusterlab.generate_file(data, "T10I4D3K", items=200, seed=5)
    seq = clusterlab.mine(data, min_support=0.02)
    name = fresh_name()
    try:
        size = lun_bytes_needed([e - s for s, e in partition_ranges(data, 3)])
        with Testbed(StarTopo(hosts=3, rate="1Gbit", storage=True), name=name) as tb, \
                IscsiTarget(tb, initiators=3, lun_size=size, shared=True) as tgt:
            url = tgt.luns[0]["url"]
            with in_netns(tb.host("h0").ns):
                write_partitions(url, data, 3)
            for algorithm in ("hpa", "pfp", "cd"):
                sets, _ = mine_parallel(url, nodes=3, algorithm=algorithm, min_support=0.02, testbed=name)
                assert sets.equals(seq), algorithm
            # a job whose rank count differs from the LUN's partitions is refused by the ranks
            with pytest.raises(ConfigError, match="holds 3 partitions"):
                mine_parallel(url, nodes=2, algorithm="hpa", min_support=0.02, testbed=name)
    finally:
        clean_storage(name)
        clean(name)
    assert storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}
