"""Mining input on an iSCSI LUN (clusterlab.storage.source): the layout, the URL, and (root)
HPA/PFP/CD reading their partitions from the target give byte-identical results."""

from __future__ import annotations

import pytest

from clusterlab.cluster import InProcess
from clusterlab.cluster import Testbed as OnTestbed
from clusterlab.errors import ConfigError
from clusterlab.storage.source import check_url, layout, pack_header, parse_pieces, parse_url, unpack_header


@pytest.mark.parametrize("url", ["iscsi://", "iscsi://10.0.0.3/x/1", "iscsi://10.0.0.3/iqn.a:b/one",
                                 "iscsi://10.0.0.3:99999/iqn.a:b/1", "iscsi://10.0.0.3/iqn.a:b",
                                 "iscsi://10.0.0.3/iqn.a:b/1?block=1000", "iscsi://10.0.0.3/iqn.a:b/1?connections=0",
                                 "iscsi://10.0.0.3/iqn.a:b/1?block=8388608", "iscsi://10.0.0.3/iqn.a:b/1?depth=2"])
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
    u = parse_url("iscsi://10.0.0.3/iqn.x:y.shared/2?block=1048576&connections=2")
    assert (u.block, u.connections) == (1 << 20, 2) and parse_url(str(u)) == u


def test_pieces_cut_anywhere_parse_as_the_whole_text():
    import random

    from clusterlab import _core
    from clusterlab.errors import BasketFormatError

    text = b"".join(b" ".join(str(random.Random(i).randint(1, 999)).encode() for _ in range(i % 7)) + b"\n"
                    for i in range(400)) + b"5 5 6"  # empty lines, duplicates, no final newline
    whole = _core.parse_fimi(text)
    rng = random.Random(1)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, 30)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        b = parse_pieces(pieces, "x")
        assert b.offsets.tolist() == whole[0].tolist() and b.items.tolist() == whole[1].tolist()
        assert b.duplicates_dropped == whole[2] > 0
    assert len(parse_pieces([], "x")) == 0
    # an error names the line counted over all pieces
    with pytest.raises(BasketFormatError, match=r"lun \(partition 2\).*:4:3"):
        parse_pieces([b"1\n2\n", b"3\n4 x\n"], "lun (partition 2)")
    # ... also in a line cut across pieces, after empty lines and pieces without a newline
    with pytest.raises(BasketFormatError, match=r"x.*:4:5"):
        parse_pieces([b"1\n\n", b"\n2", b" 3", b" x", b"4\n5\n"], "x")
    with pytest.raises(BasketFormatError, match=r"x.*:3:1"):
        parse_pieces([b"1\n2", b"\n", b"y 3\n"], "x")


def test_hpa_rescan_reads_the_share_again_every_pass(tmp_path, monkeypatch):
    import clusterlab
    from clusterlab.mining.parallel import driver
    from clusterlab.mining.parallel.config import ParallelConfig

    data = tmp_path / "t.dat"
    clusterlab.generate_file(data, "T10I4D3K", items=200, seed=5)
    seq = clusterlab.mine(data, min_support=0.02)
    reads = []
    real = driver.read_rank_baskets

    def counted(path, rank, size, format=None):
        reads.append(rank)
        return real(path, rank, size, format)

    monkeypatch.setattr(driver, "read_rank_baskets", counted)
    for algorithm in ("hpa", "hpa-eld"):
        for local_pairs in (True, False):
            reads.clear()
            run = driver.run_parallel(data, 3, algorithm, 0.02, cluster=InProcess(),
                                      config=ParallelConfig(rescan=True, local_pairs=local_pairs))
            assert run.table.equals(driver.run_parallel(data, 3, algorithm, 0.02, cluster=InProcess()).table)
            assert sorted(reads).count(0) == len(run.passes) + 1  # one read per pass (and the next's)
            assert sorted(set(reads)) == [0, 1, 2]
    assert driver.run_parallel(data, 3, "hpa", 0.02, cluster=InProcess()).table.num_rows == seq.num_rows
    with pytest.raises(ConfigError, match="rescan is an option of hpa"):
        driver.run_parallel(data, 2, "cd", 0.02, cluster=InProcess(), config=ParallelConfig(rescan=True))


@pytest.mark.slow
def test_mining_from_the_target_equals_mining_the_file(tmp_path):
    from .test_storage_root import _require

    _require()
    import clusterlab
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork, clean
    from clusterlab.cluster.testbed.storage import IscsiTarget, clean_storage, storage_leftovers
    from clusterlab.data import read_partition
    from clusterlab.mining.parallel import mine_parallel
    from clusterlab.mining.parallel.config import ParallelConfig
    from clusterlab.net.netns import in_netns
    from clusterlab.storage.source import (
        decode_pieces,
        lun_bytes_needed,
        partition_ranges,
        read_rank_baskets,
        read_rank_bytes,
        write_partitions,
    )

    from ..testbed.helpers import fresh_name

    data = tmp_path / "t.dat"
    clusterlab.generate_file(data, "T10I4D3K", items=200, seed=5)
    seq = clusterlab.mine(data, min_support=0.02)
    name = fresh_name()
    try:
        size = lun_bytes_needed([e - s for s, e in partition_ranges(data, 3)])
        with TestbedNetwork(StarTopo(hosts=3, rate="1Gbit", storage=True), name=name) as tb, \
                IscsiTarget(tb, initiators=3, lun_size=size, shared=True) as tgt:
            url = tgt.luns[0]["url"]
            for layout in ("packed", "fimi"):  # version 2 (the default) and version 1 still readable
                with in_netns(tb.host("h0").ns):
                    regions = write_partitions(url, data, 3, layout=layout)
                # Every algorithm reads its share through the one driver reader (the layout is the
                # reader's business): all three on the default layout, one on version 1.
                for algorithm in ("hpa", "pfp") if layout == "packed" else ():
                    sets, _ = mine_parallel(url, nodes=3, algorithm=algorithm, min_support=0.02, cluster=OnTestbed(name))
                    assert sets.equals(seq), (layout, algorithm)
                # cd: on version 1 with the default URL; on version 2 with larger commands, fewer in
                # flight (the URL's options)
                sets, _ = mine_parallel(url + ("?block=1048576&connections=2" if layout == "packed" else ""), nodes=3,
                                        algorithm="cd", min_support=0.02, cluster=OnTestbed(name))
                assert sets.equals(seq), layout
                # HPA rescanning the LUN every pass
                sets, _ = mine_parallel(url, nodes=3, algorithm="hpa", min_support=0.02, cluster=OnTestbed(name),
                                        config=ParallelConfig(rescan=True))
                assert sets.equals(seq)
                # read ahead in small pieces (cut anywhere) = read whole and parsed or decoded
                with in_netns(tb.host("h1").ns):
                    raw = read_rank_bytes(url, 1, 3)
                    whole = (parse_pieces([raw], "x") if layout == "fimi"
                             else decode_pieces([raw], regions[1], "x"))
                    streamed = read_rank_baskets(url, 1, 3, block=4096, segment=8192)
                assert streamed.to_lists() == whole.to_lists() and len(whole) > 100
                assert streamed.to_lists() == read_partition(str(data), 1, 3).to_lists()
                assert (len(raw) < (partition_ranges(data, 3)[1][1] - partition_ranges(data, 3)[1][0]) / 2) == (
                    layout == "packed")
            # a job whose rank count differs from the LUN's partitions is refused by the ranks
            with pytest.raises(ConfigError, match="holds 3 partitions"):
                mine_parallel(url, nodes=2, algorithm="hpa", min_support=0.02, cluster=OnTestbed(name))
    finally:
        clean_storage(name)
        clean(name)
    assert storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}


@pytest.mark.parametrize("kw, msg", [({"network": "wan"}, "network must be one of consolidated, san"),
                                     ({"bonnie_size": "10MB"}, "bonnie_size must be a multiple of 4194304"),
                                     ({"algorithm": "apriori"}, "algorithm must be one of"),
                                     ({"backing_rate": "fast"}, "backing_rate"),
                                     ({"layout": "text"}, "layout must be one of packed, fimi, got 'text'")])
def test_mining_workload_refuses_bad_settings(kw, msg):
    from clusterlab.experiments.workloads.storage import mining_from_target

    with pytest.raises(ConfigError, match=msg):
        mining_from_target(**kw)
    w = mining_from_target(bonnie=True, bonnie_size="8MiB", network="san")
    assert (w.params["bonnie"], w.params["network"], w.params["rescan"]) == (True, "san", True)
    assert (w.params["layout"], mining_from_target(layout="fimi").params["layout"]) == ("packed", "fimi")
