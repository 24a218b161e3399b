import { lchown, lstat, type FileHandle } from 'node:fs/promises';

/**
 * Owners of the files nvshmem-efa writes into a user's tree. Run as root (as it is on shared nodes), a file it
 * replaces by a rename would otherwise become root's: the replacement gets the original's owner and group, and a
 * file or directory it creates gets those of the directory it is created in. An unprivileged user cannot give a
 * file away: then only the group is kept, where the user is a member of it (as an editor saving a file does).
 */
export interface Owner {
  uid: number;
  gid: number;
}

export async function ownerOf(p: string): Promise<Owner> {
  const st = await lstat(p);
  return { uid: st.uid, gid: st.gid };
}

const isRoot = () => process.geteuid?.() === 0;

/** What `chown` may do here: everything as root, else at most the group (EPERM when not a member). */
async function tryChown(set: (uid: number, gid: number) => Promise<void>, now: Owner, want: Owner): Promise<void> {
  if (now.uid === want.uid && now.gid === want.gid) return;
  if (isRoot()) return set(want.uid, want.gid);
  if (now.gid === want.gid) return;
  try {
    await set(-1, want.gid);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') throw e;
  }
}

/** Gives the open file `fh` the owner `want` (call before chmod: a chown clears set-user-ID and set-group-ID bits). */
export async function chownHandle(fh: FileHandle, want: Owner): Promise<void> {
  const st = await fh.stat();
  await tryChown((u, g) => fh.chown(u, g), { uid: st.uid, gid: st.gid }, want);
}

/** Gives `p` (never a link's target) the owner `want`. */
export async function chownLike(p: string, want: Owner): Promise<void> {
  await tryChown((u, g) => lchown(p, u, g), await ownerOf(p), want);
}
