//! The observation tee: every input, output chunk, resize, signal and exit of a PTY session,
//! numbered with one global `seq` and stamped with monotonic time from the session's start.
//! Sinks (a cassette writer, a test) must not block: a slow sink would stall the session.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

/// One thing that happened at the terminal boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// Bytes written to the program (keys, a paste, a query reply).
    Input {
        bytes: Vec<u8>,
    },
    /// Bytes the program wrote, as one chunk read from the PTY.
    Output {
        bytes: Vec<u8>,
    },
    Resize {
        rows: u16,
        cols: u16,
    },
    /// A signal sent to the program's process group.
    Signal {
        signal: i32,
    },
    /// Something the caller notes in a stream of its own (`frames`: a screen worth keeping;
    /// `service`: an event of the session's record), numbered with the rest.
    Mark {
        stream: String,
        data: serde_json::Value,
    },
    /// The program ended: an exit code or the signal that ended it.
    Exit {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// Contiguous from 0 across every kind of event.
    pub seq: u64,
    /// Microseconds since the tee was made (monotonic clock, never the wall clock).
    pub t_us: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// Receives observations in `seq` order.
pub trait Sink: Send {
    fn observe(&mut self, observation: &Observation);
    /// The sink is removed before the session ends: finish what it writes.
    fn close(&mut self) {}
}

struct Inner {
    start: Instant,
    next_seq: u64,
    sinks: Vec<Box<dyn Sink>>,
}

/// A shared tee: clones feed the same sequence.
#[derive(Clone)]
pub struct Tee {
    inner: Arc<Mutex<Inner>>,
}

impl Default for Tee {
    fn default() -> Self {
        Tee::new()
    }
}

impl Tee {
    pub fn new() -> Tee {
        Tee {
            inner: Arc::new(Mutex::new(Inner {
                start: Instant::now(),
                next_seq: 0,
                sinks: Vec::new(),
            })),
        }
    }

    pub fn add_sink(&self, sink: Box<dyn Sink>) {
        self.lock().sinks.push(sink);
    }

    /// Removes every sink, closing each.
    pub fn close_sinks(&self) {
        for mut sink in std::mem::take(&mut self.lock().sinks) {
            sink.close();
        }
    }

    /// Whether anything is listening (callers skip costly observations otherwise).
    pub fn has_sinks(&self) -> bool {
        !self.lock().sinks.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A sink that panicked must not take the session down with it.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Numbers `event` and hands it to every sink; one lock keeps `seq` and delivery order
    /// the same.
    pub fn record(&self, event: Event) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let t_us = u64::try_from(inner.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        let observation = Observation { seq, t_us, event };
        for sink in &mut inner.sinks {
            sink.observe(&observation);
        }
        seq
    }
}

/// A sink that keeps everything in memory (tests).
#[cfg(test)]
#[derive(Clone, Default)]
pub struct Memory {
    pub seen: Arc<Mutex<Vec<Observation>>>,
}

#[cfg(test)]
impl Memory {
    pub fn observations(&self) -> Vec<Observation> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
impl Sink for Memory {
    fn observe(&mut self, observation: &Observation) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(observation.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_is_contiguous_across_threads_and_time_is_monotonic() {
        let tee = Tee::new();
        let memory = Memory::default();
        tee.add_sink(Box::new(memory.clone()));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let tee = tee.clone();
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        tee.record(Event::Signal { signal: i });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let seen = memory.observations();
        assert_eq!(seen.len(), 1000);
        for (i, o) in seen.iter().enumerate() {
            assert_eq!(o.seq, i as u64);
        }
        assert!(seen.windows(2).all(|w| w[0].t_us <= w[1].t_us));
    }
}
