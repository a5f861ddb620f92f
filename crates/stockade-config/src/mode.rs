//! Which sandbox mode a run gets, and from where: one precedence table for
//! `stockade exec` and the agent's policy service alike.
//!
//! A session's own choice ranks above `$STOCKADE_MODE`: the variable
//! replaces the deployment's default (what `[policy] mode` says), which
//! every session without a choice of its own follows; a session switched
//! from the editor keeps its switch. `exec` has no session, the agent no
//! flag.

use std::ffi::OsString;

use stockade_core::SandboxMode;

use crate::schema::{ConfigError, ENV_MODE};

/// Where a mode can come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeSource {
    /// `stockade exec --mode`.
    Flag,
    /// The session's own switch (`sandbox/mode` in its log).
    Session,
    /// `$STOCKADE_MODE`.
    Env,
    /// `[policy] mode`.
    Config,
    /// Nothing set one: [`DEFAULT_MODE`].
    Default,
}

/// The first of these that is set decides.
pub const MODE_PRECEDENCE: [ModeSource; 5] = [
    ModeSource::Flag,
    ModeSource::Session,
    ModeSource::Env,
    ModeSource::Config,
    ModeSource::Default,
];

/// The mode when nothing sets one.
pub const DEFAULT_MODE: SandboxMode = SandboxMode::WorkspaceWrite;

/// What each source says, where it says anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModeLayers {
    pub flag: Option<SandboxMode>,
    pub session: Option<SandboxMode>,
    pub env: Option<SandboxMode>,
    pub config: Option<SandboxMode>,
}

impl ModeLayers {
    fn get(&self, source: ModeSource) -> Option<SandboxMode> {
        match source {
            ModeSource::Flag => self.flag,
            ModeSource::Session => self.session,
            ModeSource::Env => self.env,
            ModeSource::Config => self.config,
            ModeSource::Default => Some(DEFAULT_MODE),
        }
    }

    /// The mode, and the source that decided it.
    pub fn resolve(&self) -> (SandboxMode, ModeSource) {
        MODE_PRECEDENCE
            .iter()
            .find_map(|&s| self.get(s).map(|m| (m, s)))
            .unwrap_or((DEFAULT_MODE, ModeSource::Default))
    }

    /// [`Self::resolve`] with `$STOCKADE_MODE` read by `read`, only when no
    /// source above it decides: an unusable value is an error only when it
    /// would be used.
    pub fn resolve_reading_env(
        mut self,
        read: impl FnOnce() -> Result<Option<SandboxMode>, ConfigError>,
    ) -> Result<(SandboxMode, ModeSource), ConfigError> {
        let above = MODE_PRECEDENCE
            .iter()
            .take_while(|&&s| s != ModeSource::Env)
            .any(|&s| self.get(s).is_some());
        if !above && self.env.is_none() {
            self.env = read()?;
        }
        Ok(self.resolve())
    }
}

/// [`MODE_PRECEDENCE`] as the agent's policy service applies it per call
/// (its `ModeRule`): the session's switch against the configured default,
/// in which `$STOCKADE_MODE` was applied at load.
pub fn session_mode(session: Option<SandboxMode>, configured: SandboxMode) -> SandboxMode {
    ModeLayers {
        session,
        config: Some(configured),
        ..Default::default()
    }
    .resolve()
    .0
}

/// `$STOCKADE_MODE` of this process, if set.
pub fn env_mode() -> Result<Option<SandboxMode>, ConfigError> {
    env_mode_from(|name| std::env::var_os(name))
}

/// `$STOCKADE_MODE` in any environment, if set: a value of the mode
/// vocabulary, else an error naming the variable.
pub fn env_mode_from(
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<SandboxMode>, ConfigError> {
    let Some(v) = var(ENV_MODE) else {
        return Ok(None);
    };
    let text = v.to_str().ok_or(ConfigError::Env {
        var: ENV_MODE,
        message: "is not valid UTF-8".into(),
    })?;
    text.parse()
        .map(Some)
        .map_err(|e: stockade_core::ParseVocabularyError| ConfigError::Env {
            var: ENV_MODE,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ModeSource::*;
    use SandboxMode::{DangerFullAccess as D, ReadOnly as R, WorkspaceWrite as W};

    #[test]
    fn the_first_set_source_decides_and_the_environment_is_read_only_when_it_would() {
        // (flag, session, env, config) => (mode, source)
        let rows = [
            ((None, None, None, None), (W, Default)),
            ((None, None, None, Some(R)), (R, Config)),
            ((None, None, Some(D), Some(R)), (D, Env)),
            ((None, Some(R), Some(D), Some(W)), (R, Session)),
            ((Some(D), Some(R), Some(W), Some(R)), (D, Flag)),
            ((Some(R), None, None, None), (R, Flag)),
            ((None, Some(D), None, None), (D, Session)),
            ((None, None, Some(R), None), (R, Env)),
        ];
        for ((flag, session, env, config), want) in rows {
            let layers = ModeLayers {
                flag,
                session,
                env,
                config,
            };
            assert_eq!(layers.resolve(), want, "{layers:?}");
            // Read lazily: the same answer when the environment supplies
            // the value, and a bad value fails only when nothing above it
            // decides.
            let lazy = ModeLayers {
                env: None,
                ..layers
            };
            assert_eq!(
                lazy.resolve_reading_env(|| Ok(env)).ok(),
                Some(want),
                "{layers:?}"
            );
            let bad =
                lazy.resolve_reading_env(|| env_mode_from(|_| Some(OsString::from("sandboxed"))));
            let env_would_be_read = matches!(want.1, Env | Config | Default);
            match bad {
                Err(ConfigError::Env { var, .. }) => {
                    assert!(env_would_be_read, "{layers:?}");
                    assert_eq!(var, ENV_MODE);
                }
                Ok(got) => {
                    assert!(!env_would_be_read, "{layers:?}");
                    assert_eq!(got, want);
                }
                Err(e) => panic!("{layers:?}: {e:?}"),
            }
        }
    }
}
