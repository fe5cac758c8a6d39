use super::*;

/// The loser of a publication race frees its own stripe and counts into the winner's.
/// Under valgrind's memcheck (CI) a leak or a double free fails this test.
#[test]
fn a_lost_publication_frees_its_own_stripe_and_keeps_the_winners() {
    let totals = Striped::new();
    totals.add(Counter::Succeeded);
    let table = totals.table().expect("published by the first event");
    let entry = &table[stripes_of_thread() & SLOT_MASK];
    let winner = Striped::stripe(entry).map(std::ptr::from_ref);
    let loser = Box::into_raw(Box::new(Stripe(std::array::from_fn(|_| AtomicU64::new(0)))));
    let mut freed = 0;
    Striped::publish(entry, loser, |p| {
        assert_eq!(p, loser);
        freed += 1;
        // SAFETY: `p` is `loser`, from `Box::into_raw` above, never published.
        drop(unsafe { Box::from_raw(p) })
    });
    assert_eq!(freed, 1);
    assert_eq!(Striped::stripe(entry).map(std::ptr::from_ref), winner);
    totals.add(Counter::Failed);
    assert_eq!((totals.sum().succeeded, totals.sum().failed), (1, 1));
}

#[test]
fn totals_are_exact_with_more_threads_than_stripes_and_threads_that_come_and_go() {
    let totals = Striped::new();
    let threads = 2 * stripe_count() + 3;
    // Two rounds: the second round's threads take over stripes that exited threads owned.
    for _ in 0..2 {
        std::thread::scope(|s| {
            for t in 0..threads {
                let totals = &totals;
                s.spawn(move || {
                    for i in 0..10_000 {
                        totals.add(if (i + t) % 4 == 0 {
                            Counter::Failed
                        } else {
                            Counter::Succeeded
                        });
                    }
                });
            }
        });
    }
    let sum = totals.sum();
    let all = 2 * threads as u64 * 10_000;
    assert_eq!(sum.failed + sum.succeeded, all);
    assert_eq!(sum.admitted, all);
    assert_eq!(sum.failed, all / 4);
}
