import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './styles/base.css';
import './styles/views.css';
import { App } from './App.js';

render(<App />, document.getElementById('root')!);
