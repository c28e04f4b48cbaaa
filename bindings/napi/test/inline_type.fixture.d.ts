// check_types.mjs must refuse this file (ctest napi_types_check_refuses_inline: WILL_FAIL): each
// declaration below has an inline object type.
export interface Fine {
  a: number;
}
export interface Config {
  shape: { n: number };
}
export declare function f(options?: { x?: boolean }): void;
export type Alias = { y: string };
