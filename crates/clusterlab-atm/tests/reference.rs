//! The cell model against a brute-force simulation of the same rules: every cell made
//! explicitly, each port's cells sorted by (slot, input in the slot's rotated order), and a
//! queue of departure times (cells leave it when their departure has passed). Random switches, loads and policies.

use clusterlab_atm::cell::{cells_for, CellSwitch, Discard, Outcome, PortStats, SwitchConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};

#[derive(Clone, Debug)]
struct Offer {
    t_ns: u64,
    input: usize,
    outputs: Vec<u16>,
    sdu: usize,
    tag: u64,
}

/// A cell at an output: (arrival ps, input, offer index, cell index, cells of its frame).
type Cell = (u64, usize, usize, u32, u32);

/// Outcomes (sorted) and per-port stats of the reference.
fn reference(cfg: SwitchConfig, offers: &[Offer]) -> (Vec<Outcome>, Vec<PortStats>) {
    let c = cfg.cell_ps;
    let mut in_busy = vec![0u64; cfg.ports];
    let mut cells: Vec<Vec<Cell>> = vec![Vec::new(); cfg.ports];
    let mut stats = vec![PortStats::default(); cfg.ports];
    for (k, f) in offers.iter().enumerate() {
        let n = cells_for(f.sdu);
        let start = (f.t_ns * 1000).max(in_busy[f.input]);
        in_busy[f.input] = start + n as u64 * c;
        for &o in &f.outputs {
            let o = o as usize;
            if o == f.input {
                continue;
            }
            stats[o].frames_in += 1;
            for j in 0..n {
                let arrival = start + (j as u64 + 1) * c;
                cells[o].push((arrival.div_ceil(c) * c, f.input, k, j, n));
            }
        }
    }
    let mut outcomes = Vec::new();
    for o in 0..cfg.ports {
        let p = cfg.ports as u64;
        cells[o].sort_by_key(|x| (x.0, (x.1 as u64 + p - (x.0 / c) % p) % p));
        let mut queue: VecDeque<u64> = VecDeque::new();
        let mut last_dep = 0u64;
        // Per frame: (lost, state: 0 whole / 1 dropping / 2 refused, enqueued, last departure).
        let mut frames: HashMap<usize, (bool, u8, u32, u64)> = HashMap::new();
        let mut eom_lost = vec![false; cfg.ports];
        let st = &mut stats[o];
        for &(t, input, k, j, n) in &cells[o] {
            while queue.front().is_some_and(|&d| d <= t) {
                queue.pop_front();
            }
            let occ = queue.len() as u32;
            st.cells_in += 1;
            let fr = frames.entry(k).or_insert((false, 0, 0, 0));
            let (first, last) = (j == 0, j + 1 == n);
            if first && eom_lost[input] {
                eom_lost[input] = false;
                fr.0 = true;
            }
            let take = match fr.1 {
                2 => false,
                1 => last,
                _ => match cfg.discard {
                    Discard::Epd { threshold } if first && occ >= threshold => {
                        fr.1 = 2;
                        fr.0 = true;
                        false
                    }
                    _ => true,
                },
            };
            if take && occ < cfg.buffer_cells {
                let dep = t.max(last_dep) + c;
                last_dep = dep;
                queue.push_back(dep);
                fr.2 += 1;
                fr.3 = dep;
                st.cells_out += 1;
                st.max_queue_cells = st.max_queue_cells.max(occ + 1);
            } else if take {
                st.cells_dropped += 1;
                fr.0 = true;
                if cfg.discard != Discard::None {
                    fr.1 = 1;
                }
                if last {
                    eom_lost[input] = true;
                }
            } else {
                st.cells_discarded += 1;
            }
            if last {
                let tag = offers[k].tag;
                if fr.0 {
                    st.frames_lost += 1;
                    st.cells_wasted += fr.2 as u64;
                    outcomes.push(Outcome::Lost { tag, output: o as u16, wasted_cells: fr.2 });
                } else {
                    st.frames_delivered += 1;
                    outcomes.push(Outcome::Deliver { tag, output: o as u16, at_ns: fr.3.div_ceil(1000) });
                }
            }
        }
    }
    outcomes.sort_by_key(key);
    (outcomes, stats)
}

fn key(o: &Outcome) -> (u64, u16) {
    match *o {
        Outcome::Deliver { tag, output, .. } | Outcome::Lost { tag, output, .. } => (tag, output),
    }
}

/// The model, advanced at every offer's time (as the switch's loop does) and then to the end.
fn model(cfg: SwitchConfig, offers: &[Offer]) -> (Vec<Outcome>, Vec<PortStats>) {
    let mut sw = CellSwitch::new(cfg).unwrap();
    let mut out = Vec::new();
    // (last cell's time, copies) of every offer: each must be decided by the first advance at
    // or after that time (the switch's loop wakes then and not again for it).
    let mut due: Vec<(u64, usize)> = Vec::new();
    for f in offers {
        sw.advance(f.t_ns, &mut out);
        let decided: usize = due.iter().filter(|(t, _)| *t <= f.t_ns).map(|(_, k)| k).sum();
        assert_eq!(out.len(), decided, "frames whose last cell came by {} ns must be decided", f.t_ns);
        let last = sw.offer(f.t_ns, f.input, &f.outputs, f.sdu, f.tag);
        due.push((last, f.outputs.iter().filter(|&&o| o as usize != f.input).count()));
    }
    sw.advance(u64::MAX / 1000, &mut out);
    assert_eq!(sw.late_offers(), 0);
    assert_eq!(sw.next_decision_ns(), None);
    // Per port, deliveries come out in order of departure.
    for o in 0..cfg.ports {
        let times: Vec<u64> = out.iter().filter_map(|x| match *x {
            Outcome::Deliver { output, at_ns, .. } if output as usize == o => Some(at_ns),
            _ => None,
        }).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "port {o}: {times:?}");
    }
    out.sort_by_key(key);
    (out, (0..cfg.ports).map(|o| sw.stats(o)).collect())
}

fn random_case(rng: &mut ChaCha8Rng) -> (SwitchConfig, Vec<Offer>) {
    let ports = rng.gen_range(2..8);
    let buffer_cells = rng.gen_range(1..64);
    let discard = match rng.gen_range(0..3) {
        0 => Discard::None,
        1 => Discard::Ppd,
        _ => Discard::Epd { threshold: rng.gen_range(1..=buffer_cells) },
    };
    let cfg = SwitchConfig { ports, cell_ps: rng.gen_range(1_000..5_000_000), buffer_cells, discard };
    let mut t = 0u64;
    let offers = (0..rng.gen_range(1..300)).map(|tag| {
        t += rng.gen_range(0..20) * cfg.cell_ps / 1000 + rng.gen_range(0..3);
        let input = rng.gen_range(0..ports);
        let outputs = if rng.gen_bool(0.15) {
            (0..ports as u16).filter(|_| rng.gen_bool(0.6)).collect()
        } else {
            vec![rng.gen_range(0..ports) as u16]
        };
        Offer { t_ns: t, input, outputs, sdu: rng.gen_range(1..2000), tag }
    }).collect();
    (cfg, offers)
}

#[test]
fn the_model_matches_the_brute_force_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(20261127);
    let mut lost = 0;
    for case in 0..600 {
        let (cfg, offers) = random_case(&mut rng);
        let (mo, ms) = model(cfg, &offers);
        let (ro, rs) = reference(cfg, &offers);
        assert_eq!(ms, rs, "case {case}: {cfg:?}");
        assert_eq!(mo, ro, "case {case}: {cfg:?}");
        lost += ms.iter().map(|s| s.frames_lost).sum::<u64>();
    }
    assert!(lost > 1000, "the cases must overflow ports: {lost}"); // the cases test something
}

/// Goodput of `n` greedy inputs sending `sdu`-byte frames into one port for 20 000 cell times:
/// the share of the port's cell times spent on cells of frames that were delivered. Each input
/// leaves a random gap of up to two cell times between its frames (hosts' frames do not keep
/// one phase), drawn from a fixed seed.
fn greedy_goodput(n: usize, sdu: usize, discard: Discard) -> f64 {
    let cfg = SwitchConfig { ports: n + 1, cell_ps: 1_000_000, buffer_cells: 256, discard };
    let mut sw = CellSwitch::new(cfg).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1995);
    let mut out = Vec::new();
    let cells = cells_for(sdu) as u64;
    let horizon_ns = 20_000 * 1000;
    let mut next: Vec<u64> = (0..n).map(|_| rng.gen_range(0..cells * 1000)).collect();
    loop {
        let (i, &t) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
        if t > horizon_ns {
            break;
        }
        sw.advance(t, &mut out);
        sw.offer(t, i, &[n as u16], sdu, 0);
        next[i] = t + cells * 1000 + rng.gen_range(0..2000);
    }
    sw.advance(u64::MAX / 1000, &mut out);
    let good = out.iter().filter(|o| matches!(o, Outcome::Deliver { at_ns, .. } if *at_ns <= horizon_ns)).count() as u64;
    (good * cells) as f64 / 20_000.0
}

#[test]
fn floyd_and_romanow_ordering_no_discard_below_ppd_below_epd() {
    // Greedy inputs into one port of 256 cells (measured, none / PPD / EPD at 32 cells: two
    // inputs, 1500 bytes 0.03 / 0.57 / 1.00, 9188 bytes 0.02 / 0.58 / 0.98; three inputs of
    // 1500 bytes 0.02 / 0.16 / 1.00). Every frame loses a cell under plain UBR.
    for (n, sdu) in [(2usize, 1500usize), (2, 9188), (3, 1500)] {
        let none = greedy_goodput(n, sdu, Discard::None);
        let ppd = greedy_goodput(n, sdu, Discard::Ppd);
        let epd = greedy_goodput(n, sdu, Discard::Epd { threshold: 32 });
        assert!(none < 0.1, "plain UBR collapses: {none:.3}");
        assert!(none < ppd && ppd < epd, "{n} inputs, sdu {sdu}: none {none:.3} ppd {ppd:.3} epd {epd:.3}");
        assert!(epd > 0.9, "EPD keeps the port busy with whole frames: {epd:.3}");
    }
    // Larger frames lose more under plain UBR (three inputs: 0.019 at 1500 bytes, 0 at 9188).
    assert!(greedy_goodput(3, 9188, Discard::None) < greedy_goodput(3, 1500, Discard::None));
}
