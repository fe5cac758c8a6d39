use super::*;
use crate::breaker::policy::SlidingWindow;
use crate::breaker::window::{Sample, Window};
use proptest::prelude::*;

proptest! {
    /// The lock-free count window agrees with the sequential one (`Window::Count`, kept as
    /// the reference) on every total after every outcome, across closed periods: a new
    /// generation starts an empty window, as the breaker's lock-guarded window cleared it.
    #[test]
    fn agrees_with_the_sequential_count_window(
        n in 1u32..40,
        steps in prop::collection::vec((any::<bool>(), any::<bool>(), 0u8..20), 1..300),
    ) {
        let ring = CountWindow::new(n, 0);
        let mut reference = Window::new(SlidingWindow::Count(n));
        let mut generation = 0u32;
        for (failure, slow, roll) in steps {
            if roll == 0 {
                generation += 3; // a trip, a probe, a close
                reference.clear();
                prop_assert_eq!(ring.counts(generation), WindowCounts::default());
            }
            let want = reference.record(Sample { failure, slow }, 0);
            prop_assert_eq!(ring.record(generation, failure, slow), Some(want));
            prop_assert_eq!(ring.counts(generation), want);
        }
    }
}

#[test]
fn late_outcomes_change_nothing() {
    let w = CountWindow::new(3, 5);
    w.record(5, true, false);
    w.record(6, false, false); // a newer period takes over
    assert_eq!(w.record(5, true, false), None, "older generation: late");
    assert_eq!(
        w.counts(6),
        WindowCounts {
            calls: 1,
            failures: 0,
            slow: 0
        }
    );
    assert_eq!(w.counts(5), WindowCounts::default());
}

#[test]
fn a_slot_left_from_32_generations_ago_is_not_evicted() {
    // The slot tag is the generation's low 5 bits; the first lap never evicts, so a slot
    // last written 32 generations ago (same tag) is not subtracted.
    let w = CountWindow::new(2, 0);
    w.record(0, true, false);
    w.record(0, true, false);
    let c = w.record(32, false, false).unwrap();
    assert_eq!((c.calls, c.failures), (1, 0));
    let c = w.record(32, false, false).unwrap();
    assert_eq!((c.calls, c.failures), (2, 0));
    let c = w.record(32, true, false).unwrap(); // evicts this period's first success
    assert_eq!((c.calls, c.failures), (2, 1));
}

#[test]
fn a_success_in_a_window_full_of_successes_takes_no_position() {
    let n = 5;
    let w = CountWindow::new(n, 1);
    let mut reference = Window::new(SlidingWindow::Count(n));
    let ok = Sample {
        failure: false,
        slow: false,
    };
    for _ in 0..n {
        assert!(matches!(
            w.record_outcome(1, false, false),
            Recorded::Counts(_)
        ));
        reference.record(ok, 0);
    }
    let pos = w.pos.load(Ordering::Relaxed);
    for _ in 0..1000 {
        assert!(matches!(
            w.record_outcome(1, false, false),
            Recorded::Healthy
        ));
        reference.record(ok, 0);
    }
    assert_eq!(w.pos.load(Ordering::Relaxed), pos, "no position taken");
    assert!(w.is_healthy(1));
    assert!(!w.is_healthy(2), "another closed period's window");
    // A failure still leaves the window `n` outcomes later, as in the sequential ring.
    let failure = Sample {
        failure: true,
        slow: false,
    };
    assert_eq!(w.record(1, true, false), Some(reference.record(failure, 0)));
    for i in 0..n {
        let c = w.record(1, false, false).unwrap();
        assert_eq!(c, reference.record(ok, 0));
        assert_eq!(
            c.failures,
            u32::from(i + 1 < n),
            "after {} successes",
            i + 1
        );
    }
    assert!(w.is_healthy(1), "the failure left the window");
    assert!(matches!(
        w.record_outcome(1, true, false),
        Recorded::Counts(_)
    ));
    assert!(!w.is_healthy(1), "a failure in the window");
    // A slow success is recorded, not skipped.
    assert!(matches!(w.record_outcome(1, false, true), Recorded::Counts(c) if c.slow == 1));
}

#[test]
fn threads_keep_the_totals_consistent() {
    let w = CountWindow::new(64, 1);
    // Past the first lap, the totals follow what each thread evicts and writes, whatever
    // the interleaving (a thread preempted mid-record included).
    for _ in 0..64 {
        w.record(1, false, false);
    }
    std::thread::scope(|s| {
        for t in 0..4 {
            let w = &w;
            s.spawn(move || {
                for i in 0..20_000u32 {
                    w.record(1, (i + t) % 3 == 0, i % 5 == 0);
                }
            });
        }
    });
    // The totals equal what the ring holds.
    let mut want = WindowCounts::default();
    for s in w.ring.iter() {
        let s = s.load(Ordering::Relaxed);
        want.calls += u32::from(s & PRESENT != 0);
        want.failures += u32::from(s & FAILURE != 0);
        want.slow += u32::from(s & SLOW != 0);
    }
    assert_eq!(w.counts(1), want);
    assert_eq!(want.calls, 64);
}
