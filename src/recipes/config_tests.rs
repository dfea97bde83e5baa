//! Scripted-event tests of the config machine: see config.rs.
