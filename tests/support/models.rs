//! What the model tests share: a property's shortest counterexample,
//! checked short, in the words its snapshot holds.

use std::time::Instant;

use zoosim::models::{render_path, shortest, RecipeModel, World};

/// `world` fails `property`: its shortest counterexample (asserted to
/// have at most 15 steps), its length and the text the snapshot `name`
/// holds.
pub fn counterexample<R: RecipeModel>(
    world: &World<R>,
    property: &'static str,
    name: &str,
) -> (usize, String) {
    let start = Instant::now();
    let path =
        shortest(world, property).unwrap_or_else(|| panic!("{name}: {property} not violated"));
    eprintln!(
        "{name}: {property} violated in {} steps, found in {:.2?}",
        path.len(),
        start.elapsed()
    );
    assert!(path.len() <= 15, "{name}: {} steps", path.len());
    let text = format!(
        "{name}: counterexample to {property} ({} steps)\n{}",
        path.len(),
        render_path(world, &path)
    );
    (path.len(), text)
}
