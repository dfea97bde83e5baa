//! Scripted-event tests of the revocable machine: see revocable.rs.
