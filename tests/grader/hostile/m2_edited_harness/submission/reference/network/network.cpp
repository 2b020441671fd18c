// Hostile submission "m2_edited_harness": an edited copy of the harness that would report any
// Op Time and correctness it likes. It must never be compiled: if it were, the build would stop
// here.
#error "the edited harness of a submission was compiled: the grader must use its pristine copy"
