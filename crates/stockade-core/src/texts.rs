//! Fixed model-facing texts. Each is defined once, here.

use crate::mode::SandboxMode;

/// `[sandbox: file access denied under <mode> mode]`
pub fn denial_marker(mode: SandboxMode) -> String {
    format!("[sandbox: file access denied under {mode} mode]")
}

/// Follows the denial marker wherever it is shown.
pub const DENIAL_INSTRUCTION: &str = "The sandbox refused a file effect of this command. Do not try to work around the denial (no other paths, tools, interpreters or encodings to reach the same effect).";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_names_the_mode() {
        assert_eq!(
            denial_marker(SandboxMode::ReadOnly),
            "[sandbox: file access denied under read-only mode]"
        );
        assert_eq!(
            denial_marker(SandboxMode::WorkspaceWrite),
            "[sandbox: file access denied under workspace-write mode]"
        );
    }
}
