//! The socket engine over socketpairs: framing, partial reads and writes, size limits, peer
//! close, timeouts.

use clusterlab_net::engine::{Engine, EventKind, Outcome, DIRECT_MIN, STAGE};
use clusterlab_net::wire::{self, Kind};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

const SEC: Duration = Duration::from_secs(5);

fn frame(kind: Kind, tag: i32, source: i32, payload: &[u8]) -> Vec<u8> {
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, kind, tag, source, payload.len() as u64, b"", &[], 0);
    let mut v = h[..n].to_vec();
    v.extend_from_slice(payload);
    v
}

fn array_frame(tag: i32, source: i32, dtype: &[u8], shape: &[u64], payload: &[u8]) -> Vec<u8> {
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, Kind::Array, tag, source, payload.len() as u64, dtype, shape, 0);
    let mut v = h[..n].to_vec();
    v.extend_from_slice(payload);
    v
}

fn msg(o: Outcome) -> (i32, Kind, Vec<u8>) {
    match o {
        Outcome::Msg(src, m) => (src, m.kind, m.data.to_vec()),
        other => panic!("expected a message, got {other:?}"),
    }
}

fn event(o: Outcome) -> (i32, EventKind, String) {
    match o {
        Outcome::Event(e) => (e.peer, e.kind, String::from_utf8_lossy(&e.detail).into_owned()),
        other => panic!("expected an event, got {other:?}"),
    }
}

/// Rank 0's engine over a socketpair whose other end (rank 1's side) the test writes raw.
fn engine_and_raw(max_frame: u64) -> (Engine, UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    (Engine::new(&[(1, a.as_raw_fd())], max_frame), a, b)
}

#[test]
fn many_frames_in_one_write_every_kind_in_order() {
    let (mut e, _a, mut raw) = engine_and_raw(1 << 20);
    let mut bytes = Vec::new();
    bytes.extend(frame(Kind::Bytes, 3, 1, b"one"));
    bytes.extend(array_frame(3, 1, b"<i4", &[2, 2], &[1u8; 16]));
    bytes.extend(frame(Kind::Bytes, 9, 1, b""));
    bytes.extend(frame(Kind::Bytes, 3, 1, b"two"));
    bytes.extend(frame(Kind::Abort, 0, 1, b"{\"rank\": 1}"));
    bytes.extend(frame(Kind::Bye, 0, 1, b""));
    raw.write_all(&bytes).unwrap();
    // events come first, in arrival order
    assert_eq!(event(e.wait(1, 3, SEC)), (1, EventKind::Abort, "{\"rank\": 1}".into()));
    assert_eq!(event(e.wait(1, 3, SEC)).1, EventKind::Bye);
    assert_eq!(msg(e.wait(1, 9, SEC)), (1, Kind::Bytes, vec![]));
    assert_eq!(msg(e.wait(1, 3, SEC)), (1, Kind::Bytes, b"one".to_vec()));
    match e.wait(-1, 3, SEC) {
        Outcome::Msg(1, m) => assert_eq!((m.dtype.unwrap().as_str(), m.shape, m.data.len()), ("<i4", vec![2, 2], 16)),
        other => panic!("{other:?}"),
    }
    assert_eq!(msg(e.wait(1, 3, SEC)).2, b"two");
    let c = e.counters();
    assert_eq!((c[0].msgs_recv, c[0].bytes_recv), (4, bytes.len() as u64));
}

#[test]
fn frames_arriving_one_byte_at_a_time() {
    let (mut e, _a, mut raw) = engine_and_raw(1 << 20);
    let small = frame(Kind::Bytes, 1, 1, b"hello");
    let big: Vec<u8> = (0..DIRECT_MIN * 3).map(|i| (i % 251) as u8).collect();
    let mut all = small.clone();
    all.extend(array_frame(2, 1, b"|u1", &[big.len() as u64], &big));
    let writer = thread::spawn(move || {
        // the header and meta byte by byte, then the rest in odd-sized pieces
        let (head, rest) = all.split_at(small.len() + wire::HEADER_LEN + 3 + 8 + 5);
        for b in head {
            raw.write_all(&[*b]).unwrap();
            thread::sleep(Duration::from_micros(200));
        }
        for piece in rest.chunks(7919) {
            raw.write_all(piece).unwrap();
        }
        raw
    });
    assert_eq!(msg(e.wait(1, 1, SEC)).2, b"hello");
    let (_, kind, data) = msg(e.wait(1, 2, SEC));
    assert_eq!((kind, data.len()), (Kind::Array, big.len()));
    assert!(data == big, "the direct path reassembles the payload exactly");
    writer.join().unwrap();
}

#[test]
fn messages_larger_than_the_stage_and_partial_writes() {
    let (a, b) = UnixStream::pair().unwrap();
    let mut e0 = Engine::new(&[(1, a.as_raw_fd())], 1 << 30);
    let mut e1 = Engine::new(&[(0, b.as_raw_fd())], 1 << 30);
    let payload: Vec<u8> = (0..STAGE * 20 + 13).map(|i| (i * 7 % 256) as u8).collect();
    let p2 = payload.clone();
    // the receiver starts late: the sender's kernel buffer fills, sendmsg writes part, waits
    let rx = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        let got = msg(e1.wait(0, 4, SEC)).2;
        (got, e1)
    });
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, Kind::Bytes, 4, 0, p2.len() as u64, b"", &[], 0);
    e0.send(1, &h[..n], &p2, SEC).unwrap();
    let (got, _e1) = rx.join().unwrap();
    assert!(got == payload);
    assert_eq!(e0.counters()[0].bytes_sent, (n + payload.len()) as u64);
}

#[test]
fn both_sides_sending_large_messages_at_once_do_not_deadlock() {
    let (a, b) = UnixStream::pair().unwrap();
    let big = vec![5u8; 16 << 20];
    let run = |fd: i32, me: i32, peer: i32, big: Vec<u8>| {
        thread::spawn(move || {
            let mut e = Engine::new(&[(peer, fd)], 1 << 30);
            let mut h = [0u8; wire::MAX_HEAD];
            let n = wire::encode(&mut h, Kind::Bytes, 0, me, big.len() as u64, b"", &[], 0);
            e.send(peer, &h[..n], &big, SEC).unwrap(); // drains the peer's message meanwhile
            msg(e.wait(peer, 0, SEC)).2.len()
        })
    };
    let t0 = run(a.as_raw_fd(), 0, 1, big.clone());
    let t1 = run(b.as_raw_fd(), 1, 0, big);
    assert_eq!((t0.join().unwrap(), t1.join().unwrap()), (16 << 20, 16 << 20));
}

#[test]
fn size_limits_are_the_receivers() {
    let (mut e, _a, mut raw) = engine_and_raw(1000);
    raw.write_all(&frame(Kind::Bytes, 0, 1, &[0u8; 1000])).unwrap();
    assert_eq!(msg(e.wait(1, 0, SEC)).2.len(), 1000);
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, Kind::Bytes, 0, 1, 1001, b"", &[], 0);
    raw.write_all(&h[..n]).unwrap(); // the header alone condemns it: nothing is allocated
    let (peer, kind, detail) = event(e.wait(1, 0, SEC));
    assert_eq!((peer, kind), (1, EventKind::Protocol));
    assert_eq!(detail, "rank 1 sent a 1001-byte frame; the limit is 1000 bytes");
    assert!(matches!(e.wait(1, 0, SEC), Outcome::Closed(1)), "the connection is dropped");

    let (mut e, _a, mut raw) = engine_and_raw(1 << 30);
    let n = wire::encode(&mut h, Kind::Abort, 0, 1, (1 << 20) + 1, b"", &[], 0);
    raw.write_all(&h[..n]).unwrap();
    assert!(event(e.wait(1, 0, SEC)).2.ends_with("control frame (limit 1 MiB)"));
}

#[test]
fn garbage_and_impostors_are_protocol_events() {
    for (bytes, text) in [
        (b"GET / HTTP/1.0\r\n\r\nxxxxxxxxxx".to_vec(), "rank 1 sent a frame with bad magic b'GET '"),
        (frame(Kind::Bytes, 0, 2, b"x"), "rank 1 sent a frame claiming to come from rank 2"),
        (frame(Kind::Control, 0, 1, b"{}"), "rank 1 sent an unexpected control frame (kind 4)"),
        (array_frame(0, 1, b"|O8", &[1], &[0; 8]), "rank 1 sent an array of unsupported dtype b'|O8'"),
        (array_frame(0, 1, b"<f8", &[3], &[0; 8]), "rank 1 sent an array of shape (3,) and dtype '<f8' in 8 bytes"),
    ] {
        let (mut e, _a, mut raw) = engine_and_raw(1 << 20);
        raw.write_all(&bytes).unwrap();
        assert_eq!(event(e.wait(1, 0, SEC)), (1, EventKind::Protocol, text.to_string()));
    }
}

#[test]
fn peer_close_with_and_without_goodbye() {
    let (mut e, _a, mut raw) = engine_and_raw(1 << 20);
    raw.write_all(&frame(Kind::Bytes, 7, 1, b"last words")).unwrap();
    raw.write_all(&frame(Kind::Bye, 0, 1, b"")).unwrap();
    drop(raw);
    assert_eq!(event(e.wait(1, 7, SEC)).1, EventKind::Bye);
    assert_eq!(msg(e.wait(1, 7, SEC)).2, b"last words", "queued before the goodbye: still delivered");
    assert_eq!(event(e.wait(1, 7, SEC)).1, EventKind::Eof);
    assert!(matches!(e.wait(1, 7, SEC), Outcome::Closed(1)));
    assert!(matches!(e.wait(-1, 7, SEC), Outcome::NoPeers));

    let (mut e, _a, raw) = engine_and_raw(1 << 20);
    drop(raw); // died without a word
    let (peer, kind, detail) = event(e.wait(1, 0, SEC));
    assert_eq!((peer, kind), (1, EventKind::Eof));
    assert!(detail.contains("without goodbye"));
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, Kind::Bytes, 0, 0, 0, b"", &[], 0);
    assert!(matches!(e.send(1, &h[..n], b"", SEC), Err(Outcome::Event(_))), "sending to it fails");
}

#[test]
fn every_wait_has_a_deadline() {
    let (mut e, _a, _raw) = engine_and_raw(1 << 20);
    let t = Instant::now();
    assert!(matches!(e.wait(1, 0, Duration::from_millis(200)), Outcome::Timeout));
    let dt = t.elapsed();
    assert!(dt >= Duration::from_millis(190) && dt < Duration::from_secs(2), "{dt:?}");
    // a peer that never reads: the send gives up at its deadline
    let big = vec![0u8; 32 << 20];
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, Kind::Bytes, 0, 0, big.len() as u64, b"", &[], 0);
    let t = Instant::now();
    assert!(matches!(e.send(1, &h[..n], &big, Duration::from_millis(300)), Err(Outcome::Timeout)));
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_failure_elsewhere_ends_a_blocked_send() {
    // rank 0 is blocked sending to rank 1 (who never reads) when rank 2 dies
    let (a1, _b1) = UnixStream::pair().unwrap();
    let (a2, b2) = UnixStream::pair().unwrap();
    let mut e = Engine::new(&[(1, a1.as_raw_fd()), (2, a2.as_raw_fd())], 1 << 30);
    let killer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        drop(b2);
    });
    let big = vec![0u8; 32 << 20];
    let mut h = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut h, Kind::Bytes, 0, 0, big.len() as u64, b"", &[], 0);
    let t = Instant::now();
    let r = e.send(1, &h[..n], &big, Duration::from_secs(20));
    killer.join().unwrap();
    match r {
        Err(Outcome::Event(ev)) => assert_eq!((ev.peer, ev.kind), (2, EventKind::Eof)),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn any_source_takes_the_oldest_and_pump_reads_ahead() {
    let (a1, mut r1) = UnixStream::pair().unwrap();
    let (a2, mut r2) = UnixStream::pair().unwrap();
    let mut e = Engine::new(&[(1, a1.as_raw_fd()), (2, a2.as_raw_fd())], 1 << 20);
    r2.write_all(&frame(Kind::Bytes, 0, 2, b"from 2")).unwrap();
    thread::sleep(Duration::from_millis(20));
    assert_eq!(e.pump(1 << 20), 6);
    r1.write_all(&frame(Kind::Bytes, 0, 1, b"from 1")).unwrap();
    thread::sleep(Duration::from_millis(20));
    assert_eq!(e.pump(1 << 20), 12);
    assert_eq!(msg(e.wait(-1, 0, SEC)).0, 2);
    assert_eq!(msg(e.wait(-1, 0, SEC)).0, 1);
    e.forget(1);
    assert!(matches!(e.wait(1, 0, SEC), Outcome::Closed(1)));
    assert!(e.send_nowait(2, &frame(Kind::Bye, 0, 0, b"")));
}
