//! The schema's tests: parsing, validation, expansion of `[policy]`'s
//! lists, the default path and the shipped example, by section.

use super::*;

mod bash_shell {
    use super::*;
    use stockade_shell::ShellChoice;

    fn parse(bash: &str) -> Result<Config, ConfigError> {
        Config::parse(
            Path::new("/etc/stockade.toml"),
            &format!("[bash]\nexecutor = \"local\"\n{bash}"),
        )
    }

    #[test]
    fn the_shell_defaults_to_auto_and_takes_every_known_value() {
        assert_eq!(
            parse("").unwrap().bash.shell_choice().unwrap(),
            ShellChoice::Auto
        );
        for (text, want) in [
            ("auto", ShellChoice::Auto),
            ("bash", ShellChoice::Bash),
            ("pwsh", ShellChoice::Pwsh),
            ("powershell", ShellChoice::PowerShell),
        ] {
            let c = parse(&format!("shell = {text:?}\n")).unwrap();
            assert_eq!(c.bash.shell_choice().unwrap(), want, "{text}");
        }
    }

    #[test]
    fn an_unknown_shell_fails_at_load_naming_the_key_and_the_value() {
        for bad in ["zsh", "PowerShell", "pwsh.exe", ""] {
            let e = parse(&format!("shell = {bad:?}\n")).unwrap_err();
            match &e {
                ConfigError::Invalid { key, message, .. } => {
                    assert_eq!(key, "bash.shell");
                    assert!(message.contains(&format!("{bad:?}")), "{message}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
            assert_eq!(
                e.to_string(),
                format!(
                    "/etc/stockade.toml: bash.shell: unknown shell {bad:?}: expected one of \"auto\", \"bash\", \"pwsh\", \"powershell\""
                )
            );
        }
        // Not a string at all: the TOML parse names the key's line.
        let e = parse("shell = 7\n").unwrap_err();
        assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
        assert!(e.to_string().contains("shell"), "{e}");
    }
}

mod parse {
    use super::*;

    fn err(text: &str) -> String {
        Config::parse(Path::new("/etc/stockade.toml"), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_full_composition_loads() {
        let c = Config::parse(
            Path::new("stockade.toml"),
            r#"
            [sandbox]
            backend = "landlock"
            [policy]
            mode = "read-only"
            [bash]
            executor = "sandboxed"
            timeout_ms = 5000
            [fs]
            provider = "sandboxed"
            [approval]
            policy = "ask"
            [presets]
            [model]
            model = "deepseek-reasoner"
            timeout = 30
            [agent]
            max_steps = 8
            "#,
        )
        .unwrap();
        assert_eq!(c.policy.mode, SandboxMode::ReadOnly);
        assert!(c.confines());
        assert_eq!(c.model.api_key_env, "DEEPSEEK_API_KEY");
    }

    #[test]
    fn opt_out_is_configuration_only() {
        let c = Config::parse(
            Path::new("s.toml"),
            "[bash]\nexecutor = \"local\"\n[fs]\nprovider = \"local\"\n",
        )
        .unwrap();
        assert!(!c.confines());
        assert!(c.sandbox.is_none() && c.approval.is_none());
    }

    #[test]
    fn misconfigurations_fail_at_load_naming_file_key_and_values() {
        let cases = [
            ("unknown key", "[sandbox]\nbakend = \"auto\"\n"),
            ("unknown section", "[sandbx]\n"),
            (
                "mode outside the vocabulary",
                "[sandbox]\n[policy]\nmode = \"full\"\n",
            ),
            (
                "approval outside the vocabulary",
                "[sandbox]\n[approval]\npolicy = \"maybe\"\n",
            ),
            ("bad backend", "[sandbox]\nbackend = \"firejail\"\n"),
            (
                "executor outside the vocabulary",
                "[sandbox]\n[bash]\nexecutor = \"docker\"\n",
            ),
            (
                "sandboxed executor without a provider",
                "[bash]\nexecutor = \"sandboxed\"\n",
            ),
            ("presets without approval", "[sandbox]\n[presets]\n"),
            (
                "presets without a confining executor",
                "[approval]\n[presets]\n[bash]\nexecutor = \"local\"\n",
            ),
            (
                "multi-line runner signature",
                "[sandbox]\nrunner_command = [\"/bin/fake\"]\nrunner_failure_signatures = [\"a\\nb\"]\n",
            ),
            (
                "signatures without runner_command",
                "[sandbox]\nrunner_failure_signatures = [\"x\"]\n",
            ),
            ("empty runner_command", "[sandbox]\nrunner_command = []\n"),
            (
                "relative writable root",
                "[sandbox]\n[policy]\nwritable_roots = [\"/ok\", \"rel\"]\n",
            ),
            (
                "`..` in a read-only path",
                "[sandbox]\n[policy]\ndeny_read = []\nread_only = [\"/a/../b\"]\n",
            ),
            (
                "deny-read of the filesystem root",
                "[sandbox]\n[policy]\ndeny_read = [\"/\"]\n",
            ),
            (
                "writable filesystem root",
                "[sandbox]\n[policy]\nwritable_roots = [\"/x\", \"/\"]\n",
            ),
            (
                "unknown group",
                "[sandbox]\n[policy]\nwritable_roots = [\"@maven\"]\n",
            ),
            (
                "group in deny_read",
                "[sandbox]\n[policy]\ndeny_read = [\"@npm\"]\n",
            ),
            (
                "writable_roots not a list",
                "[sandbox]\n[policy]\nwritable_roots = \"/x\"\n",
            ),
            (
                "a writable root not a string",
                "[sandbox]\n[policy]\nwritable_roots = [\"/x\", 1]\n",
            ),
            (
                "network outside the vocabulary",
                "[sandbox]\n[policy]\nnetwork = \"open\"\n",
            ),
            (
                "a URL for an allowed host",
                "[sandbox]\n[policy]\nallowed_hosts = [\"crates.io\", \"https://github.com\"]\n",
            ),
            (
                "a host with a port",
                "[sandbox]\n[policy]\nallowed_hosts = [\"example.com:443\"]\n",
            ),
            (
                "allowed_hosts not a list",
                "[sandbox]\n[policy]\nallowed_hosts = \"crates.io\"\n",
            ),
            (
                "a base_url that is no URL",
                "[sandbox]\n[model]\nbase_url = \"api.example.com\"\n",
            ),
            (
                "a base_url that is not http",
                "[sandbox]\n[model]\nbase_url = \"file:///etc\"\n",
            ),
            ("an empty model", "[sandbox]\n[model]\nmodel = \" \"\n"),
            (
                "a preset named twice",
                "[sandbox]\n[approval]\n[presets]\n[[presets.preset]]\nname = \"a\"\nmode = \"read-only\"\napproval = \"ask\"\n[[presets.preset]]\nname = \"a\"\nmode = \"read-only\"\napproval = \"ask\"\n",
            ),
            (
                "a reserved preset name",
                "[sandbox]\n[approval]\n[presets]\n[[presets.preset]]\nname = \"custom\"\nmode = \"read-only\"\napproval = \"ask\"\n",
            ),
            (
                "an empty preset name",
                "[sandbox]\n[approval]\n[presets]\n[[presets.preset]]\nname = \"\"\nmode = \"read-only\"\napproval = \"ask\"\n",
            ),
            ("max_steps = 0", "[sandbox]\n[agent]\nmax_steps = 0\n"),
            (
                "approval timeout_ms = 0",
                "[sandbox]\n[approval]\ntimeout_ms = 0\n",
            ),
            (
                "approval max_questions = 0",
                "[sandbox]\n[approval]\nmax_questions = 0\n",
            ),
            (
                "an unknown hook event",
                "[sandbox]\n[[hooks]]\nevent = \"pre_commit\"\ncommand = \"true\"\n",
            ),
            (
                "a matcher on a stop hook",
                "[sandbox]\n[[hooks]]\nevent = \"stop\"\ncommand = \"true\"\n[[hooks]]\nevent = \"stop\"\nmatcher = \"bash\"\ncommand = \"true\"\n",
            ),
            (
                "an empty hook command",
                "[sandbox]\n[[hooks]]\nevent = \"pre_tool\"\ncommand = \"\"\n",
            ),
        ];
        let text: Vec<String> = cases
            .iter()
            .map(|(what, toml)| format!("{what}:\n{}", err(toml)))
            .collect();
        insta::assert_snapshot!(text.join("\n\n"));
    }
}

mod file_policy {
    use super::*;

    const FILE: &str = "/etc/s.toml";

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn parse(policy: &str, env: &'static [(&'static str, &'static str)]) -> Result<Config, String> {
        let text = format!("[sandbox]\n[policy]\n{policy}");
        Config::parse_in(Path::new(FILE), &text, &vars(env)).map_err(|e| {
            assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
            e.to_string()
        })
    }

    const HOME: &[(&str, &str)] = &[("HOME", "/home/u")];

    #[test]
    fn every_list_is_expanded_once_at_load() {
        let c = parse(
            "writable_roots = [\"~/.cache/x\", \"@npm\", \"/opt/shared\"]\ndeny_read = [\"~/.ssh\", \"/srv/secret\"]\nread_only = [\"~/proj/.env\"]\n",
            HOME,
        )
        .unwrap();
        let paths = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            c.file_policy(),
            &FilePolicy {
                writable_roots: paths(&["/home/u/.cache/x", "/home/u/.npm", "/opt/shared"]),
                deny_read: paths(&["/home/u/.ssh", "/srv/secret"]),
                // The explicit list, then the default protect list.
                read_only: [paths(&["/home/u/proj/.env"]), paths(DEFAULT_PROTECT)].concat(),
            }
        );
        // As written, for whoever shows the file back.
        assert_eq!(c.policy.writable_roots[1], PathBuf::from("@npm"));
    }

    #[test]
    fn deny_read_left_out_is_the_default_list_and_empty_is_none() {
        let c = parse("", HOME).unwrap();
        let expected = crate::default_deny_read(&vars(HOME)).unwrap();
        assert_eq!(c.file_policy().deny_read, expected);
        assert!(
            c.file_policy()
                .deny_read
                .contains(&PathBuf::from("/home/u/.ssh"))
        );
        assert!(c.file_policy().writable_roots.is_empty());
        let protect: Vec<PathBuf> = DEFAULT_PROTECT.iter().map(PathBuf::from).collect();
        assert_eq!(c.file_policy().read_only, protect);
        // No [policy] section at all: the same default.
        let c = Config::parse_in(Path::new(FILE), "[sandbox]\n", &vars(HOME)).unwrap();
        assert_eq!(c.file_policy().deny_read, expected);
        let c = parse("deny_read = []\nprotect = []\n", HOME).unwrap();
        assert!(c.file_policy().is_empty());
    }

    #[test]
    fn each_bad_entry_is_named_by_file_key_index_and_value() {
        let cases: &[(&str, &str)] = &[
            (
                "writable_roots = [\"/ok\", \"rel\"]\n",
                "/etc/s.toml: policy.writable_roots[1]: \"rel\": must be an absolute path or start with ~/",
            ),
            (
                "deny_read = [\"/a/../b\"]\n",
                "/etc/s.toml: policy.deny_read[0]: \"/a/../b\": must not contain `..` (say the path it means)",
            ),
            (
                "deny_read = []\nread_only = [\"/x\", \"/y\", \"/\"]\n",
                "/etc/s.toml: policy.read_only[2]: \"/\": is the filesystem root; it is read-only already",
            ),
            (
                "writable_roots = [\"/\"]\n",
                "/etc/s.toml: policy.writable_roots[0]: \"/\": is the filesystem root; granting it would make every file writable",
            ),
            (
                "writable_roots = [\"@cargo\", \"@maven\"]\n",
                "/etc/s.toml: policy.writable_roots[1]: \"@maven\": unknown group; the groups are @cargo, @npm, @pip, @go, @gradle",
            ),
            (
                "deny_read = [\"@npm\"]\n",
                "/etc/s.toml: policy.deny_read[0]: \"@npm\": groups name writable caches; they only mean something in writable_roots",
            ),
        ];
        for (policy, expected) in cases {
            assert_eq!(parse(policy, HOME).unwrap_err(), *expected, "{policy}");
        }
    }

    #[test]
    fn without_a_usable_home_the_default_list_fails_the_load() {
        for env in [&[][..], &[("HOME", "")], &[("HOME", "relative")]] {
            let e = Config::parse_in(Path::new(FILE), "[sandbox]\n", &|n| {
                env.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| OsString::from(v))
            })
            .unwrap_err()
            .to_string();
            assert!(
                e.starts_with(
                    "/etc/s.toml: policy.deny_read: left out, so the default list applies"
                ) && e.contains("\"~/.ssh\": names ~ but $HOME is not set")
                    && e.contains("deny_read = []"),
                "{env:?}: {e}"
            );
        }
        // Written out, the list needs no home; `~` in it still does.
        assert!(parse("deny_read = []\n", &[]).is_ok());
        assert!(parse("deny_read = [\"/srv/secret\"]\n", &[]).is_ok());
        let e = parse("deny_read = []\nwritable_roots = [\"@npm\"]\n", &[]).unwrap_err();
        assert_eq!(
            e,
            "/etc/s.toml: policy.writable_roots[0]: \"@npm\": names ~ but $HOME is not set to an absolute path"
        );
    }

    #[test]
    fn protect_defaults_to_the_host_run_list_and_can_be_changed() {
        // Left out: the default list, relative names and ~/ names kept as
        // written (placed at each run).
        let c = parse("", HOME).unwrap();
        let ro = &c.file_policy().read_only;
        for want in [
            ".envrc",
            ".vscode",
            ".mcp.json",
            "~/.bashrc",
            "~/.gitconfig",
        ] {
            assert!(ro.contains(&PathBuf::from(want)), "{want}: {ro:?}");
        }
        // Written out: exactly that (normalized), after read_only.
        let c = parse(
            "read_only = [\"/w/.env\"]\nprotect = [\"./tools/run.sh\", \"~/.zshrc\"]\n",
            HOME,
        )
        .unwrap();
        assert_eq!(
            c.file_policy().read_only,
            vec![
                PathBuf::from("/w/.env"),
                PathBuf::from("tools/run.sh"),
                PathBuf::from("~/.zshrc")
            ]
        );
        // Empty: off.
        let c = parse("protect = []\n", HOME).unwrap();
        assert!(c.file_policy().read_only.is_empty());
    }

    #[test]
    fn a_bad_protect_entry_fails_the_load_naming_key_and_value() {
        for (entry, why) in [
            ("/etc/x", "an absolute path belongs in read_only"),
            ("a/../b", "must not contain `..`"),
            ("~bob/.bashrc", "another user's home"),
            ("~", "names $HOME itself"),
            ("~/", "names $HOME itself"),
            (".", "names the writable root itself"),
            ("", "is empty"),
        ] {
            let text = format!("protect = [\".envrc\", {entry:?}]\n");
            let e = parse(&text, HOME).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("/etc/s.toml: policy.protect[1]: {entry:?}: "))
                    && e.contains(why),
                "{entry}: {e}"
            );
        }
    }

    #[test]
    fn a_list_of_the_wrong_type_names_file_and_key() {
        for (policy, key) in [
            ("writable_roots = \"/x\"\n", "writable_roots"),
            ("deny_read = [\"/x\", 1]\n", "deny_read"),
            ("read_only = { a = 1 }\n", "read_only"),
        ] {
            let text = format!("[sandbox]\n[policy]\n{policy}");
            let e = Config::parse_in(Path::new(FILE), &text, &vars(HOME))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("/etc/s.toml: ") && e.contains(key) && e.contains("line 3"),
                "{e}"
            );
        }
    }
}

mod network {
    use super::*;

    const FILE: &str = "/etc/s.toml";

    fn parse(policy: &str) -> Result<Config, ConfigError> {
        let text = format!("[sandbox]\n[policy]\ndeny_read = []\n{policy}");
        Config::parse_in(Path::new(FILE), &text, &|_| None)
    }

    #[test]
    fn left_out_the_network_follows_the_mode_and_the_default_hosts_apply() {
        let c = parse("").unwrap();
        assert_eq!(c.policy.network, None);
        assert_eq!(c.allowed_hosts(), crate::default_allowed_hosts());
        let c = parse("network = \"deny\"\nallowed_hosts = []\n").unwrap();
        assert_eq!(c.policy.network, Some(NetworkMode::Deny));
        assert!(c.allowed_hosts().is_empty());
        // Normalized once, here: lower case, no repeats.
        let c = parse("network = \"allow-listed\"\nallowed_hosts = [\"Example.COM\", \"*.example.com\", \"example.com\"]\n").unwrap();
        assert_eq!(c.allowed_hosts(), ["example.com", "*.example.com"]);
    }

    #[test]
    fn a_bad_mode_lists_the_valid_ones_naming_file_and_key() {
        let e = parse("network = \"none\"\n").unwrap_err().to_string();
        assert!(
            e.starts_with("/etc/s.toml: ")
                && e.contains("network = \"none\"")
                && e.contains(
                    "invalid network mode \"none\": expected one of deny, allow-listed, allow"
                ),
            "{e}"
        );
        let e = parse("network = true\n").unwrap_err().to_string();
        assert!(
            e.starts_with("/etc/s.toml: ") && e.contains("network = true"),
            "{e}"
        );
    }

    #[test]
    fn each_bad_host_is_named_by_file_key_index_and_value() {
        let cases: &[(&str, &str)] = &[
            (
                "allowed_hosts = [\"crates.io\", \"https://crates.io\"]\n",
                "/etc/s.toml: policy.allowed_hosts[1]: \"https://crates.io\": is a URL; name the host only (example.com)",
            ),
            (
                "allowed_hosts = [\"registry.npmjs.org/\"]\n",
                "/etc/s.toml: policy.allowed_hosts[0]: \"registry.npmjs.org/\": is a URL; name the host only (example.com)",
            ),
            (
                "allowed_hosts = [\"a.example\", \"b.example\", \"*.com\"]\n",
                "/etc/s.toml: policy.allowed_hosts[2]: \"*.com\": a suffix must have at least two labels (`*.example.com`, not `*.com`)",
            ),
            (
                "allowed_hosts = [\"\"]\n",
                "/etc/s.toml: policy.allowed_hosts[0]: \"\": is empty",
            ),
        ];
        for (policy, expected) in cases {
            let e = parse(policy).unwrap_err();
            assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
            assert_eq!(e.to_string(), *expected, "{policy}");
        }
    }

    #[test]
    fn a_host_list_of_the_wrong_type_names_file_key_and_line() {
        for policy in [
            "allowed_hosts = \"crates.io\"\n",
            "allowed_hosts = [\"crates.io\", 443]\n",
        ] {
            let e = parse(policy).unwrap_err().to_string();
            assert!(
                e.starts_with("/etc/s.toml: ")
                    && e.contains("allowed_hosts")
                    && e.contains("line 4"),
                "{e}"
            );
        }
    }
}

mod control_state {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_default_file_lives_with_the_users_configuration() {
        let path = |pairs: &[(&str, &str)]| default_path_from(vars(pairs)).unwrap();
        // An explicit $STOCKADE_CONFIG wins, taken as given.
        assert_eq!(
            path(&[
                ("STOCKADE_CONFIG", "/etc/s.toml"),
                ("XDG_CONFIG_HOME", "/x"),
                ("HOME", "/h")
            ]),
            PathBuf::from("/etc/s.toml")
        );
        assert_eq!(
            path(&[("STOCKADE_CONFIG", "rel.toml"), ("HOME", "/h")]),
            PathBuf::from("rel.toml")
        );
        assert_eq!(
            path(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]),
            PathBuf::from("/x/stockade/stockade.toml")
        );
        // Empty, unset or relative XDG_CONFIG_HOME: $HOME/.config.
        for xdg in [
            &[("XDG_CONFIG_HOME", "")][..],
            &[("XDG_CONFIG_HOME", "cfg")],
            &[],
        ] {
            let mut pairs = xdg.to_vec();
            pairs.push(("HOME", "/h"));
            pairs.push(("STOCKADE_CONFIG", ""));
            assert_eq!(
                path(&pairs),
                PathBuf::from("/h/.config/stockade/stockade.toml"),
                "{xdg:?}"
            );
        }
    }

    #[test]
    fn the_current_directory_is_never_the_default() {
        // Nothing to go on: an error saying what to set, not ./stockade.toml.
        for pairs in [
            &[][..],
            &[("HOME", "")],
            &[("HOME", "h"), ("XDG_CONFIG_HOME", "x")],
        ] {
            let e = default_path_from(vars(pairs)).unwrap_err();
            assert!(matches!(e, ConfigError::NoDefaultPath), "{pairs:?}: {e:?}");
            let text = e.to_string();
            assert!(
                text.contains("--config") && text.contains("$STOCKADE_CONFIG"),
                "{text}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn allow_sockets_are_absolute_paths() {
        let c = Config::parse(
            Path::new("/etc/stockade.toml"),
            "[sandbox]\nallow_sockets = [\"/run/user/1000/ssh-agent.sock\", \"/var/run/docker.sock\"]\n",
        )
        .unwrap();
        let sockets = c.sandbox.unwrap().allow_sockets;
        assert_eq!(
            sockets,
            [
                PathBuf::from("/run/user/1000/ssh-agent.sock"),
                PathBuf::from("/var/run/docker.sock")
            ]
        );
        assert!(
            Config::parse(Path::new("/etc/stockade.toml"), "[sandbox]\n")
                .unwrap()
                .sandbox
                .unwrap()
                .allow_sockets
                .is_empty()
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_relative_socket_is_refused_naming_file_key_and_index() {
        let e = Config::parse(
            Path::new("/etc/stockade.toml"),
            "[sandbox]\nallow_sockets = [\"/ok.sock\", \"agent.sock\"]\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/stockade.toml: sandbox.allow_sockets[1]: must be an absolute path, got agent.sock"
        );
        let e = Config::parse(
            Path::new("/etc/stockade.toml"),
            "[sandbox]\nallow_sockets = \"/one.sock\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("/etc/stockade.toml: "), "{e}");
    }
}

mod example {
    use super::*;

    #[test]
    fn the_shipped_example_composition_loads() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/acp-agent/stockade.toml");
        let c = Config::load(&path).unwrap();
        assert!(c.confines() && c.approval.is_some() && c.presets.is_some());
        assert_eq!(c.fs.provider, Implementation::Sandboxed);
    }
}

mod empty_paths {
    use super::*;

    /// Every path-valued key written as `""` fails at load naming that key
    /// and the file, whatever else is configured (a list's empty entry by
    /// its index, after good ones).
    #[test]
    fn an_empty_path_names_its_key_and_the_file() {
        let file = Path::new("/etc/stockade/stockade.toml");
        let cases = [
            ("sandbox", "bwrap_path = \"\"", "sandbox.bwrap_path"),
            ("sandbox", "launcher_path = \"\"", "sandbox.launcher_path"),
            (
                "sandbox",
                "allow_sockets = [\"/run/a.sock\", \"\"]",
                "sandbox.allow_sockets[1]",
            ),
            ("policy", "workspace_root = \"\"", "policy.workspace_root"),
            (
                "policy",
                "writable_roots = [\"/srv\", \"\"]",
                "policy.writable_roots[1]",
            ),
            ("policy", "deny_read = [\"\"]", "policy.deny_read[0]"),
            (
                "policy",
                "read_only = [\"/srv/a\", \"/srv/b\", \"\"]",
                "policy.read_only[2]",
            ),
            (
                "policy",
                "protect = [\".envrc\", \"\"]",
                "policy.protect[1]",
            ),
        ];
        for (section, line, key) in cases {
            let text = format!(
                "[bash]\nexecutor = \"sandboxed\"\n[{section}]\n{line}\n{}",
                if section == "sandbox" {
                    ""
                } else {
                    "[sandbox]\n"
                }
            );
            let e = Config::parse_in(file, &text, &|_| None).unwrap_err();
            match &e {
                ConfigError::Invalid {
                    path,
                    key: got,
                    message,
                } => {
                    assert_eq!(got, key, "{text}");
                    assert_eq!(path, file);
                    assert!(message.contains("is empty"), "{key}: {message}");
                }
                other => panic!("{key}: {other:?}"),
            }
            let what = if key.ends_with(']') { "entry" } else { "key" };
            assert_eq!(
                e.to_string(),
                format!(
                    "/etc/stockade/stockade.toml: {key}: \"\": is empty: write a path, or leave the {what} out"
                )
            );
        }
    }
}
