// svc_rust: a Rust service for tests/e2e/test_services.py (docs/testing.md
// "Services"): 4 std::threads hash ROUNDS rounds each through `hash_loop`
// (#[no_mangle], never inlined: the range), sleeping 2 ms between rounds
// until stdin ends (then flat out: the same work); the main thread prints a
// heartbeat once a second; at the end a checksum that depends only on ROUNDS.  Built by rustc alone (no cargo, no crates),
// for Debian 12's rustc 1.63 and later.
//
//     svc_rust [ROUNDS]    ready PID / beat N DONE/TOTAL / checksum HEX
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const WORKERS: u64 = 4;
const BUF_SIZE: usize = 2048;
const CALLS: usize = 8; // hash_loop calls a round

/// stdin has ended: the workers no longer sleep.
static HURRY: AtomicBool = AtomicBool::new(false);

/// The hot function: FNV-1a over len bytes at buf, from h.
#[no_mangle]
#[inline(never)]
pub extern "C" fn hash_loop(buf: *const u8, len: usize, h: u64) -> u64 {
    let mut h = h;
    let s = unsafe { std::slice::from_raw_parts(buf, len) };
    for &b in s {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e3779b97f4a7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

fn work(w: u64, rounds: u64, done: &AtomicU64) -> u64 {
    let mut buf = vec![0u8; BUF_SIZE];
    let mut h: u64 = 0xcbf29ce484222325;
    for r in 0..rounds {
        let mut x = (w << 32) | r;
        for i in (0..BUF_SIZE).step_by(8) {
            buf[i..i + 8].copy_from_slice(&splitmix(&mut x).to_le_bytes());
        }
        for c in 0..CALLS {
            h = hash_loop(buf[c..].as_ptr(), BUF_SIZE - c, h);
        }
        done.fetch_add(1, Ordering::Relaxed);
        if !HURRY.load(Ordering::Relaxed) {
            thread::sleep(Duration::from_millis(2));
        }
    }
    h
}

fn main() {
    let rounds: u64 = match std::env::args().nth(1) {
        None => 3000,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("usage: svc_rust [ROUNDS]");
                std::process::exit(2);
            }
        },
    };
    thread::spawn(|| {
        let mut sink = [0u8; 512];
        let mut stdin = std::io::stdin();
        while let Ok(n) = stdin.read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        HURRY.store(true, Ordering::Relaxed);
    });
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let done = Arc::clone(&done);
            thread::spawn(move || work(w, rounds, &done))
        })
        .collect();
    let out = std::io::stdout();
    writeln!(out.lock(), "ready {}", std::process::id()).unwrap();
    let start = Instant::now();
    let mut n = 1;
    while done.load(Ordering::Relaxed) < rounds * WORKERS {
        let next = start + Duration::from_secs(n);
        let now = Instant::now();
        if now >= next {
            writeln!(out.lock(), "beat {} {}/{}", n, done.load(Ordering::Relaxed), rounds * WORKERS).unwrap();
            n += 1;
        } else {
            thread::sleep((next - now).min(Duration::from_millis(20)));
        }
    }
    let mut c: u64 = 0xcbf29ce484222325;
    for h in handles {
        c = (c ^ h.join().unwrap()).wrapping_mul(0x100000001b3);
    }
    writeln!(out.lock(), "checksum {:016x}", c).unwrap();
}
