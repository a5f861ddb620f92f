//! The command line: `stockade exec`, `acp` and `probe` as clap parses them.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use stockade_config::Overrides;
use stockade_core::{NetworkMode, SandboxMode};
use stockade_local::BackendPreference;

#[derive(Parser)]
#[command(name = "stockade", version, about = "Confine what a command may write")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

#[derive(clap::Args)]
pub(crate) struct ExecArgs {
    /// read-only | workspace-write | danger-full-access (unconfined).
    /// Default: $STOCKADE_MODE, else the config's [policy] mode, else
    /// workspace-write.
    #[arg(long)]
    pub(crate) mode: Option<SandboxMode>,
    /// The stockade.toml to read ([policy] and [sandbox]; flags go over
    /// it). Default: $STOCKADE_CONFIG when set; otherwise none (a file at
    /// the default path is never read unnamed). It must lie outside the
    /// workspace, /tmp, $TMPDIR and every extra writable root.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The directory workspace-write may write under (default: the current
    /// directory). Held for the whole invocation; `/` and a symlink inside
    /// /tmp or $TMPDIR are refused.
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    /// The command's working directory (default: the current directory;
    /// `--workspace` does not change it). Resolved once, before anything
    /// runs.
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub(crate) cd: Option<PathBuf>,
    /// auto | bwrap | landlock (default: the config's [sandbox] backend,
    /// else auto)
    #[arg(long)]
    pub(crate) backend: Option<BackendPreference>,
    /// A Unix socket (absolute path) CMD may still connect to; repeatable.
    #[arg(long = "allow-socket", value_name = "PATH")]
    pub(crate) allow_sockets: Vec<PathBuf>,
    /// When stdin is a terminal: while CMD runs, ask before refusing a host
    /// not on the list (its connection waits); after a denial, ask whether
    /// to retry it once (first with just the refused directory writable,
    /// then under a wider mode).
    #[arg(long)]
    pub(crate) ask: bool,
    /// How long a question asked while CMD runs (a host not on the list,
    /// its connection held) waits for an answer before it is refused
    /// (default: the config's [approval] timeout_ms, else 60).
    #[arg(long, requires = "ask", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) ask_timeout: Option<u64>,
    /// The mode --ask offers (default: the next wider one).
    #[arg(long, requires = "ask")]
    pub(crate) escalate_to: Option<SandboxMode>,
    /// Print one JSON object with the result facts instead of streaming.
    #[arg(long)]
    pub(crate) json: bool,
    /// Another directory workspace-write may write (absolute, `~/...`, or a
    /// toolchain group: @cargo @npm @pip @go @gradle); repeatable.
    #[arg(long = "writable", value_name = "PATH|@GROUP")]
    pub(crate) writable: Vec<OsString>,
    /// A file or directory nothing confined may read, besides the default
    /// list (~/.ssh, ~/.aws, ...); repeatable.
    #[arg(long = "deny-read", value_name = "PATH")]
    pub(crate) deny_read: Vec<OsString>,
    /// Leave out the default deny-read list (only --deny-read paths apply).
    #[arg(long)]
    pub(crate) no_default_deny_read: bool,
    /// A path inside a writable root that stays read-only; repeatable.
    #[arg(long = "read-only", value_name = "PATH")]
    pub(crate) read_only: Vec<OsString>,
    /// A file the host or an editor runs, kept read-only: a name in every
    /// writable root (.envrc) or ~/NAME; besides the default list (.envrc,
    /// .vscode, .mcp.json, ~/.bashrc, ~/.gitconfig, ...); repeatable.
    #[arg(long = "protect", value_name = "NAME")]
    pub(crate) protect: Vec<OsString>,
    /// Leave out the default protect list (only --protect names apply).
    #[arg(long)]
    pub(crate) no_default_protect: bool,
    /// deny | allow-listed | allow (default: deny under read-only,
    /// allow-listed under workspace-write; danger-full-access is always
    /// allow).
    #[arg(long)]
    pub(crate) network: Option<NetworkMode>,
    /// A host allow-listed runs may reach besides the default list: a
    /// name (exact, or `*.example.com`), an address (`10.0.0.5`, `::1`) or
    /// a CIDR range (`10.0.0.0/8`); repeatable. Loopback, private,
    /// link-local and other non-public addresses are reached only when
    /// listed as an address or range, whatever a name resolves to.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allow_hosts: Vec<String>,
    /// A TCP port a server of CMD may listen on, on loopback only, under
    /// deny and allow-listed (where nothing else may listen); repeatable.
    /// Landlock enforces loopback; under bwrap the listener is in the
    /// sandbox's private network, unreachable from the host (a gap).
    #[arg(long = "allow-listen", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) allow_listen: Vec<u16>,
    /// Leave out the default host list (only --allow-host hosts).
    #[arg(long)]
    pub(crate) no_default_hosts: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<OsString>,
}

impl ExecArgs {
    /// The flags as the composition takes them, over the variables of this
    /// process read now, once.
    pub(crate) fn overrides(&self) -> Overrides {
        Overrides {
            config: self.config.clone(),
            mode: self.mode,
            workspace: self.workspace.clone(),
            cd: self.cd.clone(),
            backend: self.backend,
            allow_sockets: self.allow_sockets.clone(),
            ask: self.ask,
            escalate_to: self.escalate_to,
            ask_timeout: self.ask_timeout.map(std::time::Duration::from_secs),
            writable: self.writable.clone(),
            deny_read: self.deny_read.clone(),
            no_default_deny_read: self.no_default_deny_read,
            read_only: self.read_only.clone(),
            protect: self.protect.clone(),
            no_default_protect: self.no_default_protect,
            network: self.network,
            allow_hosts: self.allow_hosts.clone(),
            allow_listen: self.allow_listen.clone(),
            no_default_hosts: self.no_default_hosts,
            ..Overrides::from_env()
        }
    }
}

/// `stockade acp --config` as the composition takes it, over the variables
/// of this process read now, once.
pub(crate) fn acp_overrides(config: Option<PathBuf>) -> Overrides {
    Overrides {
        config,
        ..Overrides::from_env()
    }
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
    /// Run CMD confined and exit with its status; at a terminal, on a
    /// terminal of its own.
    ///
    /// When stdin, stdout and stderr are a terminal and stockade is its
    /// foreground job, CMD gets a pseudo-terminal of its own (job control,
    /// pagers, Ctrl-C for its foreground job, resize) and ours is raw until
    /// it ends. Otherwise CMD inherits stdin and stdout, and its stderr is
    /// copied through (one pipe for both when stdout and stderr are the
    /// same file, so their order is kept).
    #[command(after_help = EXEC_EXIT_CODES)]
    Exec(Box<ExecArgs>),
    /// Serve the Agent Client Protocol on stdin/stdout: a sandboxed coding
    /// agent for editors (Zed, JetBrains, Neovim). Logs go to stderr.
    Acp {
        /// The composition (default: $STOCKADE_CONFIG, else
        /// $XDG_CONFIG_HOME/stockade/stockade.toml, else
        /// ~/.config/stockade/stockade.toml). It must lie outside /tmp,
        /// $TMPDIR and every session's workspace.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Probe every backend of this platform's chain and say which `auto` selects.
    Probe {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `stockade exec --help`: what the exit status means.
const EXEC_EXIT_CODES: &str = "Exit status:
  CMD's own  CMD ran (possibly with some writes denied)
  2          bad flag value, workspace or config: nothing ran
  125        the sandbox is unavailable: nothing ran
  126        CMD is not executable
  127        CMD was not found";
