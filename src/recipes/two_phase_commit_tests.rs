//! Scripted-event tests of the two_phase_commit machine: see two_phase_commit.rs.
