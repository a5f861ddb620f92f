//! Errors in the config that only the model client or the preset service
//! used to find (after start-up, or at the first prompt) refuse the start of
//! the real `stockade acp`: exit 2 once, naming the file and the key, with
//! or without the model's key in the environment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use common::{Setup, World};

const SETUP: Setup = Setup {
    mode: "workspace-write",
    approval: Some("ask"),
    presets: true,
};

#[tokio::test(flavor = "multi_thread")]
async fn model_and_preset_errors_refuse_the_start_naming_file_and_key() {
    let Some(w) = World::new(vec![]) else { return };
    fn presets(table: &'static str) -> impl Fn(String) -> String {
        move |t: String| t.replace("[presets]\n", &format!("[presets]\n{table}"))
    }
    type Edit = Box<dyn Fn(String) -> String>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|t: String| {
                let start = t.find("base_url = ").unwrap();
                let end = start + t[start..].find('\n').unwrap();
                format!(
                    "{}base_url = \"localhost:8080/v1\"{}",
                    &t[..start],
                    &t[end..]
                )
            }),
            "model.base_url",
        ),
        (
            Box::new(|t: String| t.replace("model = \"scripted\"", "model = \"\"")),
            "model.model",
        ),
        (
            // The key's variable is missing too: the endpoint is still named.
            Box::new(|t: String| {
                t.replace("model = \"scripted\"", "model = \"\"").replace(
                    "api_key_env = \"\"",
                    "api_key_env = \"STOCKADE_TEST_NO_SUCH_KEY\"",
                )
            }),
            "model.model",
        ),
        (
            Box::new(presets(
                "[[presets.preset]]\nname = \"x\"\nmode = \"read-only\"\napproval = \"ask\"\n[[presets.preset]]\nname = \"x\"\nmode = \"workspace-write\"\napproval = \"ask\"\n",
            )),
            "presets.preset[1]",
        ),
        (
            Box::new(presets(
                "[[presets.preset]]\nname = \"configured\"\nmode = \"read-only\"\napproval = \"ask\"\n",
            )),
            "presets.preset[0]",
        ),
    ];
    for (edit, key) in cases {
        let out = w
            .server_at(&SETUP, &w.config_path(), &w.state, edit)
            .start_alone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{key}: {stderr}");
        assert!(
            stderr.contains(&format!("{}: {key}: ", w.config_path().display())),
            "{key}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{key}: said once: {stderr}");
    }
}
