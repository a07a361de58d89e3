/**
 * The template a create without `templateID` starts from: the node boots it, and the gateway
 * places the create where it is cached.
 */
export const DEFAULT_TEMPLATE = 'base';
