// Counts in words, as the page's sentences use them: "1 file", "12 files".
import * as fmt from "../format";

export function plural(n: number, what: string, many = `${what}s`): string {
  return `${fmt.count(n)} ${n === 1 ? what : many}`;
}
