//! `wrangler.toml`'s environments cannot drift from its development settings: wrangler does not
//! inherit `vars` or Durable Object bindings into `[env.staging]` and `[env.production]`, so each
//! repeats them, and this test checks that every environment sets every variable the top level
//! sets (and no other), binds both Durable Objects to their classes and the requests' Analytics
//! Engine dataset (production's under the name the dashboard reads), sends requests to a backend
//! over https (never loopback), runs in production mode with observability on, and reads tokens
//! from an identity provider's JWKS over https.

use test_harness::workerd::REQUESTS_DATASET;
use toml_edit::{DocumentMut, Item, Table};

/// The edge's `REQUESTS_DATASET_BINDING`.
const REQUESTS_DATASET_BINDING: &str = "EDGE_REQUESTS";

const ENVIRONMENTS: [&str; 2] = ["staging", "production"];

fn wrangler() -> DocumentMut {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wrangler.toml");
    std::fs::read_to_string(path)
        .expect("wrangler.toml")
        .parse()
        .expect("wrangler.toml is TOML")
}

fn names(table: &Table) -> Vec<String> {
    let mut names: Vec<String> = table.iter().map(|(name, _)| name.to_owned()).collect();
    names.sort();
    names
}

/// The dataset bound as the requests' dataset under `item` (an environment or the top level).
fn requests_dataset(item: &Item) -> String {
    let datasets = item["analytics_engine_datasets"]
        .as_array_of_tables()
        .expect("[[analytics_engine_datasets]]");
    let binding = datasets
        .iter()
        .find(|dataset| dataset["binding"].as_str() == Some(REQUESTS_DATASET_BINDING))
        .expect("the requests' dataset is bound");
    binding["dataset"]
        .as_str()
        .expect("a dataset name")
        .to_owned()
}

fn bindings(item: &Item) -> Vec<(String, String)> {
    let mut bindings: Vec<(String, String)> = item["bindings"]
        .as_array_of_tables()
        .expect("Durable Object bindings")
        .iter()
        .map(|binding| {
            let field = |name: &str| binding[name].as_str().unwrap_or_default().to_owned();
            (field("name"), field("class_name"))
        })
        .collect();
    bindings.sort();
    bindings
}

#[test]
fn every_environment_repeats_the_development_settings_for_a_real_deployment() {
    let config = wrangler();
    let development_vars = config["vars"].as_table().expect("[vars]");
    let development_bindings = bindings(&config["durable_objects"]);
    assert_eq!(development_bindings.len(), 2);
    assert_eq!(config["observability"]["enabled"].as_bool(), Some(true));
    assert_eq!(requests_dataset(config.as_item()), REQUESTS_DATASET);
    for name in ENVIRONMENTS {
        let environment = &config["env"][name];
        let vars = environment["vars"]
            .as_table()
            .unwrap_or_else(|| panic!("[env.{name}.vars]"));
        assert_eq!(
            names(vars),
            names(development_vars),
            "{name}: the variables differ"
        );
        let var = |key: &str| vars[key].as_str().unwrap_or_default();
        assert!(
            var("BACKEND_URL").starts_with("https://"),
            "{name}: BACKEND_URL over https"
        );
        assert!(
            !var("BACKEND_URL").contains("127.0.0.1") && !var("BACKEND_URL").contains("localhost")
        );
        assert!(
            var("AUTH_JWKS_URL").starts_with("https://"),
            "{name}: tokens from a JWKS"
        );
        assert_eq!(var("APP_ENV"), "production", "{name}");
        assert_eq!(
            bindings(&environment["durable_objects"]),
            development_bindings,
            "{name}"
        );
        assert_eq!(
            environment["observability"]["enabled"].as_bool(),
            Some(true),
            "{name}"
        );
        let dataset = requests_dataset(environment);
        assert!(dataset.starts_with(REQUESTS_DATASET), "{name}: {dataset}");
    }
    let production = requests_dataset(&config["env"]["production"]);
    assert_eq!(
        production, REQUESTS_DATASET,
        "the dataset the dashboard reads"
    );
}
