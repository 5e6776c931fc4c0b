/** A few lines of DOM building in place of a framework. */

export type Child = Node | string | number | null | undefined | false;
type Attribute = string | number | boolean | null | undefined | ((event: Event) => void);

/**
 * `h("a", {href: "#/post", class: "button"}, "Post a bounty")`. Text children become text nodes,
 * never markup, so what the chain's metadata says is shown as it is written. An `on…` attribute
 * with a function adds that event listener; `false`, null and undefined attributes are left out.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, Attribute> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (typeof value === "function") element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (value === true) element.setAttribute(name, "");
    else if (value !== false && value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  element.append(...nodes(children));
  return element;
}

/** Replaces the element's children. */
export function show(element: Element, ...children: Child[]): void {
  element.replaceChildren(...nodes(children));
}

function nodes(children: Child[]): (Node | string)[] {
  return children.flatMap((child) =>
    child === null || child === undefined || child === false ? [] : [typeof child === "number" ? String(child) : child]);
}
