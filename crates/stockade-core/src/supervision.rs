//! Whether a Linux kernel can run the Landlock launcher's supervisor (the
//! seccomp user-notification process that governs metadata and protected
//! paths). One decision read by the launcher, which refuses to run
//! supervised without it, and by the provider, which then asks for plain
//! Landlock and names the gaps. Pure: the callers read the host.

/// The oldest kernel with everything the supervisor uses: user notification
/// (5.0), `pidfd_getfd` and `openat2` (5.6), and answering with an installed
/// descriptor (`SECCOMP_ADDFD_FLAG_SEND`, 5.14).
pub const MIN_KERNEL: (u32, u32) = (5, 14);

/// Where the kernel lists the seccomp actions it supports.
pub const ACTIONS_AVAIL: &str = "/proc/sys/kernel/seccomp/actions_avail";

/// `release`: `uname -r`; `actions`: the contents of [`ACTIONS_AVAIL`], or
/// `None` when it cannot be read. `Err` says why there is no supervision.
pub fn check(release: &str, actions: Option<&str>) -> Result<(), String> {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if version < MIN_KERNEL {
        return Err(format!(
            "kernel {}.{} predates seccomp descriptor answers ({}.{})",
            version.0, version.1, MIN_KERNEL.0, MIN_KERNEL.1
        ));
    }
    let Some(actions) = actions else {
        return Err(format!("cannot read {ACTIONS_AVAIL}"));
    };
    if !actions.split_whitespace().any(|a| a == "user_notif") {
        return Err("seccomp user notification is not available".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &str = "kill_process kill_thread trap errno user_notif trace log allow";

    #[test]
    fn needs_a_recent_kernel_and_user_notification() {
        assert!(check("6.18.44-fc-v1045", Some(ALL)).is_ok());
        assert!(check("5.14.0", Some(ALL)).is_ok());
        assert!(check("5.13.19", Some(ALL)).unwrap_err().contains("5.13"));
        assert!(check("4.19.0", Some(ALL)).is_err());
        assert!(check("garbage", Some(ALL)).is_err());
        let without = "kill_process errno trace allow";
        assert!(
            check("6.1.0", Some(without))
                .unwrap_err()
                .contains("user notification")
        );
        assert!(check("6.1.0", None).is_err());
    }
}
