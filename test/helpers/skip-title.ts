// A skipped test proves nothing, so its title says it was skipped and why (issue 37): the reporters and the CI log
// show titles, and `.ci/run` counts the skips.

/** TITLE, with " [skipped: WHY]" where WHY is a reason (the test is skipped); TITLE alone where it is false/undefined. */
export function skipTitle(title: string, why: string | false | undefined): string {
  return why ? `${title} [skipped: ${why}]` : title;
}
