//! The control state: the files that decide the confinement of every later
//! run. The config names the executor and the default mode; a session log
//! holds a session's `sandbox/mode` override, replayed on resume. A confined
//! command must be able to write neither, so both must lie outside every
//! root a run may write: checked at startup against the temp roots (and the
//! fallback workspace, when one is configured), and at every session start
//! against that session's roots. A refused session is never created or
//! resumed. No extra writable root of `[policy] writable_roots` may contain
//! either: each is held at startup, after the control state is registered,
//! and one that contains it refuses the start.

use std::path::PathBuf;

use stockade_config::Config;
use stockade_roots::{HeldDir, RootError, RootPins};

use crate::error::ServeError;
use crate::log;
use stockade_config::{Environment, fallback_root};

/// Where the control state of this process lives.
#[derive(Debug, Clone)]
pub(crate) struct ControlFiles {
    /// `None` when the composition did not come from a file.
    pub config: Option<PathBuf>,
    /// The session store's directory.
    pub log_dir: PathBuf,
}

impl ControlFiles {
    /// Refuse when the config or the log directory lies beneath a root a run
    /// in `workspace` could write (only the temp roots when `None`).
    pub fn refuse_beneath(
        &self,
        pins: &RootPins,
        workspace: Option<&HeldDir>,
    ) -> Result<(), RootError> {
        if let Some(config) = &self.config {
            pins.refuse_beneath("config", config, workspace)?;
        }
        pins.refuse_beneath("session log directory", &self.log_dir, workspace)
    }

    /// The startup check. `[policy] workspace_root`, when configured, is
    /// held and its roots count too. Without it the fallback is the config's
    /// own directory, which by construction holds the config; it is never a
    /// run's root here (every ACP call carries a session, rooted in its
    /// cwd), so only the temp roots are checked and each session is checked
    /// against its own roots when it starts.
    pub fn check_at_startup(&self, config: &Config, env: &Environment) -> Result<(), ServeError> {
        let held = match &config.policy.workspace_root {
            Some(_) => Some(
                env.pins
                    .workspace(&fallback_root(config, env))
                    .map_err(|source| ServeError::FallbackWorkspace {
                        config: env
                            .config_file
                            .clone()
                            .unwrap_or_else(|| env.config_dir.clone()),
                        source,
                    })?,
            ),
            None => None,
        };
        self.refuse_beneath(&env.pins, held.as_deref())
            .map_err(ServeError::ControlState)
    }

    /// Register this process's control state with the pins, then hold every
    /// extra writable root once, before anything runs. Registration comes
    /// first: a root is checked against what is registered when it is held.
    /// Call it after the provider is composed, so the verdict cache and the
    /// runners it registers count too.
    pub fn hold_extra_roots(&self, config: &Config, env: &Environment) -> Result<(), ServeError> {
        if let Some(path) = &self.config {
            env.pins.add_control_path("config", path);
        }
        env.pins
            .add_control_path("session log directory", &self.log_dir);
        // `writable_roots = ["@npm"]` means the cache even before npm made it.
        for (dir, e) in stockade_local::create_group_caches(&config.policy.writable_roots) {
            log(format_args!(
                "writable root {}: cannot create it: {e}",
                dir.display()
            ));
        }
        for root in &config.file_policy().writable_roots {
            match env.pins.extra_root(root) {
                Ok(Some(_)) => {}
                // Granted once it exists: the provider holds it then.
                Ok(None) => log(format_args!(
                    "writable root {} does not exist; it is not granted until it does",
                    root.display()
                )),
                Err(source) => {
                    return Err(ServeError::ExtraRoot {
                        config: env
                            .config_file
                            .clone()
                            .unwrap_or_else(|| env.config_dir.clone()),
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}
