//! Scripted-event tests of the membership machine: see membership.rs.
