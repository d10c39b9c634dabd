//! The docs stay short enough for a newcomer to finish (issue 47): `docs/*.md` together under
//! 150 KB, `design.md` under 40 KB (one decision per short section), `figures.md` under 20 KB
//! (the current figure of each benchmark with its command; the history is in git and the
//! CHANGELOG). A change that needs more room moves a derivation next to the code it justifies,
//! or drops one.

use std::path::Path;

const ALL_DOCS: usize = 150_000;
const BUDGETS: [(&str, usize); 2] = [("design.md", 40_000), ("figures.md", 20_000)];

fn docs() -> Vec<(String, usize)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("docs/") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|ext| ext == "md") {
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            let size = std::fs::metadata(&path).expect("its size").len();
            sizes.push((name, usize::try_from(size).expect("a size")));
        }
    }
    sizes
}

#[test]
fn the_docs_fit_their_budget() {
    let sizes = docs();
    assert!(sizes.len() > 5, "found {sizes:?}");
    let total: usize = sizes.iter().map(|(_, size)| size).sum();
    assert!(
        total <= ALL_DOCS,
        "docs/*.md hold {total} bytes, over {ALL_DOCS}: {sizes:?}"
    );
    for (name, budget) in BUDGETS {
        let size = sizes
            .iter()
            .find(|(doc, _)| doc == name)
            .map(|(_, size)| *size)
            .unwrap_or_else(|| panic!("docs/{name} is missing"));
        assert!(
            size <= budget,
            "docs/{name} holds {size} bytes, over {budget}"
        );
    }
}
