export { DomainError, STATUS, conflict, invalid, notFound, type DomainErrorKind } from './errors.js';
export { errorBody, statusBody, type ErrorResponse } from './http.js';
export { checkApiKey, safeEqual } from './auth.js';
