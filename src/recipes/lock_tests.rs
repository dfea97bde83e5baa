//! Scripted-event tests of the lock machine: see lock.rs.
